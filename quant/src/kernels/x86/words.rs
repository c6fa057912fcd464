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

/// [`transpose16`]'s 8×8 form on AVX2: the block of words at `src` (8 rows `src_stride` words
/// apart) transposed to `dst` (its column `j` as 8 words at `dst + j · dst_stride`).
///
/// # Safety
/// The CPU runs AVX2; the 8 rows of 8 words at `src` are readable, the 8 of `dst` writable.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn transpose8(
    src: *const u8,
    src_stride: usize,
    dst: *mut u32,
    dst_stride: usize,
) {
    // SAFETY: the caller's contract: the loads and stores below are of those rows.
    unsafe {
        let r: [__m256i; 8] =
            core::array::from_fn(|i| _mm256_loadu_si256(src.add(4 * i * src_stride).cast()));
        // Pairs of rows interleaved (t), then fours (u): u[4h + m] holds rows 4h..4h + 4 of
        // column m in its low lane and of column 4 + m in its high lane.
        let t: [__m256i; 8] = core::array::from_fn(|i| {
            let (a, b) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi32(a, b)
            } else {
                _mm256_unpackhi_epi32(a, b)
            }
        });
        let u: [__m256i; 8] = core::array::from_fn(|i| {
            let (h, m) = (i / 4, i % 4);
            let (a, b) = (t[4 * h + m / 2], t[4 * h + m / 2 + 2]);
            if m % 2 == 0 {
                _mm256_unpacklo_epi64(a, b)
            } else {
                _mm256_unpackhi_epi64(a, b)
            }
        });
        for m in 0..4 {
            let low = _mm256_permute2x128_si256::<0x20>(u[m], u[4 + m]);
            let high = _mm256_permute2x128_si256::<0x31>(u[m], u[4 + m]);
            _mm256_storeu_si256(dst.add(m * dst_stride).cast(), low);
            _mm256_storeu_si256(dst.add((4 + m) * dst_stride).cast(), high);
        }
    }
}

/// [`awq_rows`] on AVX2, 32 columns at a time: each pair of columns' words give that pair's
/// byte in all eight rows by masks and shifts (the even nibbles of the two words interleaved are
/// four rows' bytes, the odd ones the other four's), then a transpose of bytes by shuffles.
///
/// # Safety
/// The CPU runs AVX2; `rows8` holds 8 rows of `row_bytes ≥ column.len() / 2`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn awq_rows_avx2(
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
        let low = _mm256_set1_epi32(0x0F0F_0F0F);
        let high = _mm256_set1_epi32(0xF0F0_F0F0u32 as i32);
        let evens_first = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        // Bytes `m` of each lane's four words side by side, then each row's eight as a qword.
        let bytes_by_row = _mm256_setr_epi8(
            0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6,
            10, 14, 3, 7, 11, 15,
        );
        let qwords = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        // Sixteen columns' words: qword m of the first is the 8 bytes (one a pair of columns) of
        // nibble 2m's row, of the second nibble 2m + 1's.
        let half = |at: *const u32| {
            let a = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(at.cast()), evens_first);
            let b = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(at.add(8).cast()), evens_first);
            let even_cols = _mm256_permute2x128_si256::<0x20>(a, b);
            let odd_cols = _mm256_permute2x128_si256::<0x31>(a, b);
            let even = _mm256_or_si256(
                _mm256_and_si256(even_cols, low),
                _mm256_slli_epi32::<4>(_mm256_and_si256(odd_cols, low)),
            );
            let odd = _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi32::<4>(even_cols), low),
                _mm256_and_si256(odd_cols, high),
            );
            let rows =
                |v| _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, bytes_by_row), qwords);
            (rows(even), rows(odd))
        };
        let out = rows8.as_mut_ptr();
        let store = |nibble: usize, k: usize, bytes: __m128i| {
            let at = out.add(row_of_nibble[nibble] * row_bytes + 16 * k);
            _mm_storeu_si128(at.cast(), bytes);
        };
        for k in 0..blocks {
            let (e0, o0) = half(column.as_ptr().add(32 * k));
            let (e1, o1) = half(column.as_ptr().add(32 * k + 16));
            // Nibble n's row: qword n / 2 of the even (n even) or odd halves, first then second.
            for (v, parity) in [(e0, e1), (o0, o1)].into_iter().zip([0, 1]) {
                let (lo, hi) = (
                    _mm256_unpacklo_epi64(v.0, v.1),
                    _mm256_unpackhi_epi64(v.0, v.1),
                );
                // lo: qwords 0 and 2 (nibbles 0 and 4 of the parity), hi: 1 and 3.
                store(parity, k, _mm256_castsi256_si128(lo));
                store(4 + parity, k, _mm256_extracti128_si256::<1>(lo));
                store(2 + parity, k, _mm256_castsi256_si128(hi));
                store(6 + parity, k, _mm256_extracti128_si256::<1>(hi));
            }
        }
    }
    blocks * 32
}
