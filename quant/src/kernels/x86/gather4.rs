//! Act-order lookups on AVX-512: each element's output is entry `base[c] + code` of its row's
//! tables (`integer::lookup::by_index4` is the definition), sixteen at a time by one gather.

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
