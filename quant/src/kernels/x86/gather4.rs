//! Act-order lookups: each element's output is entry `base[c] + code` of its row's tables
//! (`integer::lookup::by_index4` is the definition), sixteen at a time by one AVX-512 gather or
//! two AVX2 ones.

use core::arch::x86_64::*;

/// One row: `stream` (the row's codes as nibbles, `cols / 2` bytes), `base` (each column's
/// first entry, `cols` of them), `table` (the row's entries of `size` bytes: 2 or 4) into `dst`
/// (`cols` outputs). Columns past the last multiple of 16 are the caller's.
///
/// # Safety
/// The CPU runs AVX-512 F and BW; `table` may be read 2 bytes past its last entry (a gather of
/// 16-bit entries reads 32 bits each); every `base[c] + 15` is an entry of `table`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn row(
    stream: &[u8],
    base: &[u32],
    table: *const u8,
    size: usize,
    dst: &mut [u8],
) {
    let blocks = base.len() / 16;
    debug_assert!(stream.len() * 2 >= blocks * 16 && dst.len() >= blocks * 16 * size);
    // SAFETY: loads of 8 stream bytes and 16 bases per block, within their slices for
    // `blocks` blocks; the gathers read entries the caller vouches for; stores of 16 outputs
    // within `dst`.
    unsafe {
        let low = _mm_set1_epi16(0x0F);
        for k in 0..blocks {
            let bytes = _mm_cvtepu8_epi16(_mm_loadl_epi64(stream.as_ptr().add(8 * k).cast()));
            // Column 2j's code in byte 2j (the low nibble), column 2j + 1's in byte 2j + 1.
            let codes = _mm_or_si128(
                _mm_and_si128(bytes, low),
                _mm_slli_epi16::<8>(_mm_and_si128(_mm_srli_epi16::<4>(bytes), low)),
            );
            let at = _mm512_add_epi32(
                _mm512_cvtepu8_epi32(codes),
                _mm512_loadu_si512(base.as_ptr().add(16 * k).cast()),
            );
            let out = dst.as_mut_ptr().add(16 * k * size);
            if size == 2 {
                let entries = _mm512_i32gather_epi32::<2>(at, table.cast());
                _mm256_storeu_si256(out.cast(), _mm512_cvtepi32_epi16(entries));
            } else {
                let entries = _mm512_i32gather_epi32::<4>(at, table.cast());
                _mm512_storeu_si512(out.cast(), entries);
            }
        }
    }
}

/// [`row`] on AVX2: two gathers of eight entries per sixteen columns.
///
/// # Safety
/// As [`row`], with AVX2 in place of AVX-512.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn row_avx2(
    stream: &[u8],
    base: &[u32],
    table: *const u8,
    size: usize,
    dst: &mut [u8],
) {
    let blocks = base.len() / 16;
    debug_assert!(stream.len() * 2 >= blocks * 16 && dst.len() >= blocks * 16 * size);
    // SAFETY: as in `row`: loads of 8 stream bytes and 16 bases per block, gathers of entries
    // the caller vouches for, stores of 16 outputs within `dst`.
    unsafe {
        let low = _mm_set1_epi8(0x0F);
        let entry16 = _mm256_set1_epi32(0xFFFF);
        for k in 0..blocks {
            let bytes = _mm_loadl_epi64(stream.as_ptr().add(8 * k).cast());
            // Byte j of the stream holds columns 2j (low nibble) and 2j + 1: interleaved, the
            // sixteen codes in column order.
            let codes = _mm_unpacklo_epi8(
                _mm_and_si128(bytes, low),
                _mm_and_si128(_mm_srli_epi16::<4>(bytes), low),
            );
            let bases = base.as_ptr().add(16 * k);
            let first = _mm256_add_epi32(
                _mm256_cvtepu8_epi32(codes),
                _mm256_loadu_si256(bases.cast()),
            );
            let second = _mm256_add_epi32(
                _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(codes)),
                _mm256_loadu_si256(bases.add(8).cast()),
            );
            let out = dst.as_mut_ptr().add(16 * k * size);
            if size == 2 {
                let a = _mm256_and_si256(_mm256_i32gather_epi32::<2>(table.cast(), first), entry16);
                let b =
                    _mm256_and_si256(_mm256_i32gather_epi32::<2>(table.cast(), second), entry16);
                // The pack works within 128-bit lanes: qwords a0 b0 a1 b1, put back in order.
                let packed = _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi32(a, b));
                _mm256_storeu_si256(out.cast(), packed);
            } else {
                let a = _mm256_i32gather_epi32::<4>(table.cast(), first);
                let b = _mm256_i32gather_epi32::<4>(table.cast(), second);
                _mm256_storeu_si256(out.cast(), a);
                _mm256_storeu_si256(out.add(32).cast(), b);
            }
        }
    }
}
