//! The int32 words of the transposed layouts (GPTQ, AWQ) on AVX-512, as `integer::codes`
//! defines them: 16×16 blocks of words transposed in registers (`transpose`), and AutoAWQ's
//! words of one word column (eight rows, one word per input column) made those eight rows'
//! nibble streams, 32 columns at a time (`nibbles`).

use core::arch::x86_64::*;

/// `column`'s words (one a column, nibble `p` of each the code of row `row_of_nibble[p]`) into
/// `rows8` (eight rows of `row_bytes` bytes: two columns a byte, the first in the low nibble),
/// for the first `column.len() / 32 * 32` columns; returns how many.
///
/// # Safety
/// The CPU runs AVX-512 F, BW and VL; `rows8` holds 8 rows of `row_bytes ≥ column.len() / 2`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
pub(crate) unsafe fn awq_rows(
    column: &[u32],
    row_of_nibble: &[usize; 8],
    row_bytes: usize,
    rows8: &mut [u8],
) -> usize {
    let blocks = column.len() / 32;
    debug_assert!(rows8.len() >= 8 * row_bytes && row_bytes >= blocks * 16);
    // SAFETY: loads of 32 words of `column` per block, stores of 16 bytes within each row of
    // `rows8` (`row_bytes` ≥ 16 per block).
    unsafe {
        let low = _mm512_set1_epi32(0xF);
        for k in 0..blocks {
            let a = _mm512_loadu_si512(column.as_ptr().add(32 * k).cast());
            let b = _mm512_loadu_si512(column.as_ptr().add(32 * k + 16).cast());
            for (p, &row) in row_of_nibble.iter().enumerate() {
                let shift = _mm_cvtsi32_si128(4 * p as i32);
                // Each 64-bit lane holds two columns' words: their nibbles `p`, the second's
                // moved up by 28 bits beside the first's, are the low byte of the lane.
                let byte = |w: __m512i| {
                    let n = _mm512_and_si512(_mm512_srl_epi32(w, shift), low);
                    _mm512_cvtepi64_epi8(_mm512_or_si512(n, _mm512_srli_epi64::<28>(n)))
                };
                let bytes = _mm_unpacklo_epi64(byte(a), byte(b));
                _mm_storeu_si128(
                    rows8.as_mut_ptr().add(row * row_bytes + 16 * k).cast(),
                    bytes,
                );
            }
        }
    }
    blocks * 32
}

/// The 16×16 block of words at `src` (16 rows `src_stride` words apart, unaligned little-endian
/// int32s) transposed to `dst` (its column `j` as 16 words at `dst + j · dst_stride`).
///
/// # Safety
/// The CPU runs AVX-512 F; the 16 rows of 16 words at `src` are readable, the 16 of `dst`
/// writable.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose16(
    src: *const u8,
    src_stride: usize,
    dst: *mut u32,
    dst_stride: usize,
) {
    // SAFETY: the caller's contract: the loads and stores below are of those rows.
    unsafe {
        let r: [__m512i; 16] =
            core::array::from_fn(|i| _mm512_loadu_si512(src.add(4 * i * src_stride).cast()));
        // Pairs of rows interleaved, then fours: lane L of u[4c + m] holds rows 4c..4c + 4 of
        // column 4L + m.
        let t: [__m512i; 16] = core::array::from_fn(|i| {
            let (a, b) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_epi32(a, b)
            } else {
                _mm512_unpackhi_epi32(a, b)
            }
        });
        let u: [__m512i; 16] = core::array::from_fn(|i| {
            let (c, m) = (i / 4, i % 4);
            let (a, b) = (t[4 * c + m / 2], t[4 * c + m / 2 + 2]);
            if m % 2 == 0 {
                _mm512_unpacklo_epi64(a, b)
            } else {
                _mm512_unpackhi_epi64(a, b)
            }
        });
        // Column 4L + m: lane L of u[m], u[4 + m], u[8 + m], u[12 + m].
        for m in 0..4 {
            let lo01 = _mm512_shuffle_i32x4::<0x44>(u[m], u[4 + m]);
            let hi01 = _mm512_shuffle_i32x4::<0xEE>(u[m], u[4 + m]);
            let lo23 = _mm512_shuffle_i32x4::<0x44>(u[8 + m], u[12 + m]);
            let hi23 = _mm512_shuffle_i32x4::<0xEE>(u[8 + m], u[12 + m]);
            let columns = [
                _mm512_shuffle_i32x4::<0x88>(lo01, lo23),
                _mm512_shuffle_i32x4::<0xDD>(lo01, lo23),
                _mm512_shuffle_i32x4::<0x88>(hi01, hi23),
                _mm512_shuffle_i32x4::<0xDD>(hi01, hi23),
            ];
            for (l, column) in columns.into_iter().enumerate() {
                _mm512_storeu_si512(dst.add((4 * l + m) * dst_stride).cast(), column);
            }
        }
    }
}
