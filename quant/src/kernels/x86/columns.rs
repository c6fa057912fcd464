//! The kernels of `integer::columns`: tiles of 16 columns by 16 rows (AVX2 with F16C) or 32 rows
//! (AVX-512), each column's products one vector per 8 or 16 rows, rounded to float16 and (for
//! bfloat16) on to bfloat16 in registers, then the tile transposed to its rows, two tiles at a
//! time so that each row's 64 bytes are stored back to back.

use core::arch::x86_64::*;

use crate::integer::columns::{Columns, LaneTile, BIAS};

/// Lanes `lane..lane + 16` of every column of `columns` (a multiple of 32 of them) into the
/// sixteen rows of `tile` (each one output of 2 bytes a column): lane `lane + j` of column `c`,
/// the code `(word >> shift) & mask` of the column's word `word + lane_word + j`, is
/// `round(scale × (code − zero))` in float16 with its group's scale and zero at `group + lane +
/// j`, and in bfloat16 (`BF16`) that value rounded to nearest even.
///
/// # Safety
/// The CPU runs AVX2 and F16C; every word, scale and zero named is readable; each row's
/// outputs writable; `columns`' three lists of one length; every scale finite (an infinite or
/// NaN product would not be the general path's).
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn lanes16<const BF16: bool>(tile: &LaneTile, columns: &Columns) {
    // SAFETY: the caller's contract: each load is of a word, scale or zero it names, each store
    // of 32 bytes within a row's outputs.
    unsafe {
        let mask = _mm256_set1_epi32(tile.mask as i32);
        for c0 in (0..columns.word.len()).step_by(32) {
            let mut halves = [[_mm256_setzero_si256(); 16]; 2];
            for (h, out) in halves.iter_mut().enumerate() {
                for (k, t) in out.iter_mut().enumerate() {
                    let c = c0 + 16 * h + k;
                    let at = tile.codes.add(4 * (columns.word[c] + tile.lane_word));
                    let shift = _mm_cvtsi32_si128(columns.shift[c] as i32);
                    let g = columns.group[c] + tile.lane;
                    let (zeros, scales) = (tile.zeros.add(g), tile.scales.add(g));
                    let low = products8(at, shift, mask, zeros, scales);
                    let high = products8(at.add(32), shift, mask, zeros.add(8), scales.add(8));
                    *t = if BF16 {
                        _mm256_permute4x64_epi64::<0xD8>(_mm256_packus_epi32(
                            bfloat16_of_half(low),
                            bfloat16_of_half(high),
                        ))
                    } else {
                        _mm256_set_m128i(high, low)
                    };
                }
                transpose16(out);
            }
            put_rows(tile, c0, &halves);
        }
    }
}

/// [`lanes16`] on AVX-512 for lanes `lane..lane + 32`: each column's 32 lanes two vectors, the
/// tiles of 16 columns by 32 lanes transposed in registers to 32 rows.
///
/// # Safety
/// As [`lanes16`], with AVX-512 F, BW and VL, and all 32 of the tile's rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
pub(crate) unsafe fn lanes32_avx512<const BF16: bool>(tile: &LaneTile, columns: &Columns) {
    // SAFETY: the caller's contract.
    unsafe { lanes32_avx512_body::<BF16, false>(tile, columns) }
}

/// [`lanes32_avx512`] into bfloat16 by AVX512_BF16's `vcvtneps2bf16` (nearest even; it reads a
/// subnormal float32 as zero, and a float16 value is never one).
///
/// # Safety
/// As [`lanes32_avx512`], and the CPU runs AVX512_BF16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16,f16c")]
pub(crate) unsafe fn lanes32_avx512_bf16(tile: &LaneTile, columns: &Columns) {
    // SAFETY: the caller's contract.
    unsafe { lanes32_avx512_body::<true, true>(tile, columns) }
}

#[inline(always)]
unsafe fn lanes32_avx512_body<const BF16: bool, const NATIVE: bool>(
    tile: &LaneTile,
    columns: &Columns,
) {
    // SAFETY: as in `lanes16` (`NATIVE` only from the AVX512_BF16 wrapper).
    unsafe {
        let mask = _mm512_set1_epi32(tile.mask as i32);
        let codes = tile.codes.add(4 * tile.lane_word);
        let (zeros, scales) = (tile.zeros.add(tile.lane), tile.scales.add(tile.lane));
        let n = columns.word.len();
        let (word, shift, group) = (&columns.word[..n], &columns.shift[..n], &columns.group[..n]);
        for c0 in (0..n).step_by(32) {
            let mut rows = [[_mm256_setzero_si256(); 32]; 2];
            for (h, rows) in rows.iter_mut().enumerate() {
                let mut tile16 = [_mm512_setzero_si512(); 16];
                for (k, t) in tile16.iter_mut().enumerate() {
                    let c = c0 + 16 * h + k;
                    let at = codes.add(4 * word[c]);
                    let shift = _mm_cvtsi32_si128(shift[c] as i32);
                    let (z, s) = (zeros.add(group[c]), scales.add(group[c]));
                    let low = outputs16::<BF16, NATIVE>(at, shift, mask, z, s);
                    let high =
                        outputs16::<BF16, NATIVE>(at.add(64), shift, mask, z.add(16), s.add(16));
                    *t = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high);
                }
                transpose16x32(&tile16, rows);
            }
            for (j, &row) in tile.rows.iter().enumerate() {
                let at = row.add(2 * c0).cast::<__m256i>();
                if tile.stream {
                    _mm256_stream_si256(at, rows[0][j]);
                    _mm256_stream_si256(at.add(1), rows[1][j]);
                } else {
                    _mm256_storeu_si256(at, rows[0][j]);
                    _mm256_storeu_si256(at.add(1), rows[1][j]);
                }
            }
        }
    }
}

/// Sixteen lanes' outputs (their words at `at`, zeros and scales at `zeros` and `scales`): the
/// products rounded to float16, and (`BF16`) that rounded to bfloat16.
#[inline(always)]
unsafe fn outputs16<const BF16: bool, const NATIVE: bool>(
    at: *const u8,
    shift: __m128i,
    mask: __m512i,
    zeros: *const f32,
    scales: *const f32,
) -> __m256i {
    // SAFETY: the caller's: AVX-512 (and AVX512_BF16 where `NATIVE`), sixteen words, zeros and
    // scales readable there.
    unsafe {
        let code = _mm512_and_si512(_mm512_srl_epi32(_mm512_loadu_si512(at.cast()), shift), mask);
        // 2^23 + u as float32, less 2^23 + z: u − z exactly, without a conversion.
        let biased = _mm512_castsi512_ps(_mm512_or_si512(code, _mm512_set1_epi32(BIAS as i32)));
        let difference = _mm512_sub_ps(biased, _mm512_loadu_ps(zeros));
        let product = _mm512_mul_ps(difference, _mm512_loadu_ps(scales));
        let half = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(product);
        if !BF16 {
            half
        } else if NATIVE {
            core::mem::transmute::<__m256bh, __m256i>(_mm512_cvtneps_pbh(_mm512_cvtph_ps(half)))
        } else {
            let bits = _mm512_castps_si512(_mm512_cvtph_ps(half));
            let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
            let bias = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF));
            _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(_mm512_add_epi32(bits, bias)))
        }
    }
}

/// Sixteen columns of 32 two-byte lanes (column `k` in `a[k]`) to 32 rows of sixteen (row `e`,
/// lane `e` of every column, in `rows[e]`).
#[inline(always)]
unsafe fn transpose16x32(a: &[__m512i; 16], rows: &mut [__m256i; 32]) {
    // SAFETY: the caller runs AVX-512 F and BW.
    unsafe {
        // As `transpose16`, within each of the four 128-bit lanes: t[8h + j] lane L holds lane
        // 8L + j of columns 8h..8h + 8.
        let mut b = [_mm512_setzero_si512(); 16];
        for m in 0..8 {
            b[2 * m] = _mm512_unpacklo_epi16(a[2 * m], a[2 * m + 1]);
            b[2 * m + 1] = _mm512_unpackhi_epi16(a[2 * m], a[2 * m + 1]);
        }
        let mut c = [_mm512_setzero_si512(); 16];
        for q in 0..4 {
            let (x, y) = (&b[4 * q..4 * q + 2], &b[4 * q + 2..4 * q + 4]);
            c[4 * q] = _mm512_unpacklo_epi32(x[0], y[0]);
            c[4 * q + 1] = _mm512_unpackhi_epi32(x[0], y[0]);
            c[4 * q + 2] = _mm512_unpacklo_epi32(x[1], y[1]);
            c[4 * q + 3] = _mm512_unpackhi_epi32(x[1], y[1]);
        }
        let mut t = [_mm512_setzero_si512(); 16];
        for h in 0..2 {
            for e in 0..4 {
                let (low, high) = (c[8 * h + e], c[8 * h + 4 + e]);
                t[8 * h + 2 * e] = _mm512_unpacklo_epi64(low, high);
                t[8 * h + 2 * e + 1] = _mm512_unpackhi_epi64(low, high);
            }
        }
        // Row 8L + j: lane L of t[j] (columns 0..8), then lane L of t[8 + j] (8..16).
        let lanes01 = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
        let lanes23 = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
        for j in 0..8 {
            let first = _mm512_permutex2var_epi64(t[j], lanes01, t[8 + j]);
            let second = _mm512_permutex2var_epi64(t[j], lanes23, t[8 + j]);
            rows[j] = _mm512_castsi512_si256(first);
            rows[8 + j] = _mm512_extracti64x4_epi64::<1>(first);
            rows[16 + j] = _mm512_castsi512_si256(second);
            rows[24 + j] = _mm512_extracti64x4_epi64::<1>(second);
        }
    }
}

/// Two tiles' rows (columns `c0..c0 + 16` and `c0 + 16..c0 + 32`) to the tile's first 16 rows: each
/// row's 64 bytes back to back, streamed past the caches where the tile says its rows allow.
#[inline(always)]
unsafe fn put_rows(tile: &LaneTile, c0: usize, halves: &[[__m256i; 16]; 2]) {
    // SAFETY: the caller's: AVX, each row's 64 bytes from column `c0` writable (and aligned to
    // 32 where streaming).
    unsafe {
        for (j, &row) in tile.rows[..16].iter().enumerate() {
            let at = row.add(2 * c0).cast::<__m256i>();
            if tile.stream {
                _mm256_stream_si256(at, halves[0][j]);
                _mm256_stream_si256(at.add(1), halves[1][j]);
            } else {
                _mm256_storeu_si256(at, halves[0][j]);
                _mm256_storeu_si256(at.add(1), halves[1][j]);
            }
        }
    }
}

/// Eight lanes' products (their words at `at`, zeros and scales at `zeros` and `scales`) rounded
/// to float16.
#[inline(always)]
unsafe fn products8(
    at: *const u8,
    shift: __m128i,
    mask: __m256i,
    zeros: *const f32,
    scales: *const f32,
) -> __m128i {
    // SAFETY: the caller's: AVX2 and F16C, eight words, zeros and scales readable there.
    unsafe {
        let code = _mm256_and_si256(_mm256_srl_epi32(_mm256_loadu_si256(at.cast()), shift), mask);
        let biased = _mm256_castsi256_ps(_mm256_or_si256(code, _mm256_set1_epi32(BIAS as i32)));
        let difference = _mm256_sub_ps(biased, _mm256_loadu_ps(zeros));
        let product = _mm256_mul_ps(difference, _mm256_loadu_ps(scales));
        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(product)
    }
}

/// Eight float16 values (none NaN) as bfloat16, rounded to nearest even, each in the low half of
/// a 32-bit lane: the float32 value's bits plus `0x7FFF` and the kept part's lowest bit, the top
/// half kept. (A float16 value is a normal float32 or zero, which is all this rounding needs.)
#[inline(always)]
unsafe fn bfloat16_of_half(h: __m128i) -> __m256i {
    // SAFETY: the caller runs AVX2 and F16C.
    unsafe {
        let bits = _mm256_castps_si256(_mm256_cvtph_ps(h));
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
        let bias = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, bias))
    }
}

/// The 16 × 16 transpose of two-byte elements in `a` (row `i` in `a[i]`).
#[inline(always)]
unsafe fn transpose16(a: &mut [__m256i; 16]) {
    // SAFETY: the caller runs AVX2.
    unsafe {
        // Within each 128-bit lane, an 8 × 8 transpose of each half of the rows: elements in
        // pairs (b), pairs of pairs (c), then fours (t); t[8h + j] holds element j of rows
        // 8h..8h + 8 in its low lane and element 8 + j in its high lane.
        let mut b = [_mm256_setzero_si256(); 16];
        for m in 0..8 {
            b[2 * m] = _mm256_unpacklo_epi16(a[2 * m], a[2 * m + 1]);
            b[2 * m + 1] = _mm256_unpackhi_epi16(a[2 * m], a[2 * m + 1]);
        }
        // c[4q + e]: elements 2e, 2e + 1 of rows 4q..4q + 4.
        let mut c = [_mm256_setzero_si256(); 16];
        for q in 0..4 {
            let (x, y) = (&b[4 * q..4 * q + 2], &b[4 * q + 2..4 * q + 4]);
            c[4 * q] = _mm256_unpacklo_epi32(x[0], y[0]);
            c[4 * q + 1] = _mm256_unpackhi_epi32(x[0], y[0]);
            c[4 * q + 2] = _mm256_unpacklo_epi32(x[1], y[1]);
            c[4 * q + 3] = _mm256_unpackhi_epi32(x[1], y[1]);
        }
        let mut t = [_mm256_setzero_si256(); 16];
        for h in 0..2 {
            for e in 0..4 {
                let (low, high) = (c[8 * h + e], c[8 * h + 4 + e]);
                t[8 * h + 2 * e] = _mm256_unpacklo_epi64(low, high);
                t[8 * h + 2 * e + 1] = _mm256_unpackhi_epi64(low, high);
            }
        }
        for j in 0..8 {
            a[j] = _mm256_permute2x128_si256::<0x20>(t[j], t[8 + j]);
            a[8 + j] = _mm256_permute2x128_si256::<0x31>(t[j], t[8 + j]);
        }
    }
}
