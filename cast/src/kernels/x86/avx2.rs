//! AVX2 + F16C: [`Vector`] over `__m256i` (eight lanes), for CPUs without AVX-512.

use core::arch::x86_64::*;

use super::super::steps::{self, Step};
use super::super::vector::{spread_u6, Codes, Vector};
use super::super::KeyRun;

/// Marks every method `#[inline(always)]`, so that it inlines into the `#[target_feature]` loop.
macro_rules! avx2 {
    ($($item:item)*) => {
        $(
            #[inline(always)]
            $item
        )*
    };
}

/// Four vectors of values below 2^8 as 32 bytes in lane order (packing interleaves the 128-bit
/// lanes; one dword permutation undoes it).
#[inline(always)]
unsafe fn bytes4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
    // SAFETY: the caller's contract (AVX2).
    unsafe {
        let bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
    }
}

/// Writes 32 codes below 16, one per byte of `codes` in element order, packed two per byte (16
/// bytes) at `p`, streaming when `STREAM`.
///
/// # Safety
/// AVX2; 16 writable bytes at `p`, aligned to 16 when `STREAM`.
#[inline(always)]
pub(super) unsafe fn put_u4<const STREAM: bool>(codes: __m256i, p: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        // Codes [lo, hi] in a 16-bit lane: its low byte ORed with the lane shifted right by 4 is
        // lo | hi << 4; packing keeps the low bytes (per 128-bit lane, so the two lanes' eight
        // bytes are then put side by side).
        let pairs = _mm256_and_si256(
            _mm256_or_si256(codes, _mm256_srli_epi16::<4>(codes)),
            _mm256_set1_epi16(0xFF),
        );
        let bytes = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packus_epi16(pairs, pairs));
        let bytes = _mm256_castsi256_si128(bytes);
        if STREAM {
            _mm_stream_si128(p.cast(), bytes)
        } else {
            _mm_storeu_si128(p.cast(), bytes)
        }
    }
}

/// The bytes of `table`'s first `ROWS` (1, 4 or 8) rows of 16 at `index`'s bytes (each below
/// `16 * ROWS`): each row by a byte shuffle (which reads an index's low four bits), the row
/// picked by byte blends on bits 4, 5 and 6, moved to each byte's top bit, which a blend reads (a
/// 16-bit shift serves: no bit crosses into a byte's top bit from the byte below). A function,
/// not a closure: a closure this size was not inlined, and the intrinsics in it became calls.
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn pick<const ROWS: usize>(table: &[u8; 128], index: __m256i) -> __m256i {
    // SAFETY: the caller's contract; row `k < 8` is bytes 16k..16k + 16 of `table`.
    unsafe {
        let entry = |k: usize| {
            let row = _mm_loadu_si128(table.as_ptr().add(16 * k).cast());
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(row), index)
        };
        let bits = [
            _mm256_slli_epi16::<3>(index),
            _mm256_slli_epi16::<2>(index),
            _mm256_slli_epi16::<1>(index),
        ];
        // Each level halves the rows: rows 2k and 2k + 1 by the level's bit.
        let mut rows: [__m256i; 8] = [_mm256_setzero_si256(); 8];
        for (k, row) in rows.iter_mut().enumerate().take(ROWS) {
            *row = entry(k);
        }
        let (mut left, mut level) = (ROWS, 0);
        while left > 1 {
            for k in 0..left / 2 {
                rows[k] = _mm256_blendv_epi8(rows[2 * k], rows[2 * k + 1], bits[level]);
            }
            (left, level) = (left / 2, level + 1);
        }
        rows[0]
    }
}

/// The 32 codes of 6 bits packed at `p` (24 bytes: four in three, the first in the low bits) as
/// bytes in element order.
///
/// # Safety
/// AVX2; 24 readable bytes at `p` (read as 16 + 8).
#[inline(always)]
unsafe fn codes_u6(p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let raw = _mm256_inserti128_si256::<1>(
            _mm256_castsi128_si256(_mm_loadu_si128(p.cast())),
            _mm_loadl_epi64(p.add(16).cast()),
        );
        // Twelve bytes (four groups of three) into each 128-bit lane, then each group into a
        // 32-bit lane of its own.
        let spread = _mm256_permutevar8x32_epi32(raw, _mm256_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0));
        let pattern = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
        let groups = _mm256_shuffle_epi8(spread, _mm256_broadcastsi128_si256(pattern));
        spread_u6(groups)
    }
}

/// 32 codes below 64, one per byte of `codes` in element order, packed four in three bytes: 12
/// bytes at the start of each 128-bit lane (its 32-bit parts 0-2 and 4-6 hold the 24 bytes).
///
/// # Safety
/// AVX2.
#[inline(always)]
unsafe fn u6_groups(codes: __m256i) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        // Four codes c0..c3 of a 32-bit lane joined as c0 | c1 << 6 | c2 << 12 | c3 << 18 by two
        // multiply-adds (two instructions where shifts, masks and ors take ten): byte pairs
        // c0 + 64 * c1 (below 2^12), then 16-bit pairs w0 + 4096 * w1.
        let pairs = _mm256_maddubs_epi16(codes, _mm256_set1_epi16(0x4001));
        let groups = _mm256_madd_epi16(pairs, _mm256_set1_epi32(0x1000_0001));
        // The three low bytes of each 32-bit lane, twelve per 128-bit lane.
        let pattern = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
        _mm256_shuffle_epi8(groups, _mm256_broadcastsi128_si256(pattern))
    }
}

/// Writes 32 codes below 64, one per byte of `codes` in element order, packed four in three
/// bytes (24 bytes, written as 16 + 8) at `p`.
///
/// # Safety
/// AVX2; 24 writable bytes at `p`.
#[inline(always)]
pub(super) unsafe fn put_u6(codes: __m256i, p: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        // The two lanes' twelve bytes side by side.
        let packed = _mm256_permutevar8x32_epi32(
            u6_groups(codes),
            _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 0, 0),
        );
        _mm_storeu_si128(p.cast(), _mm256_castsi256_si128(packed));
        _mm_storel_epi64(p.add(16).cast(), _mm256_extracti128_si256::<1>(packed));
    }
}

/// Writes 128 codes below 64, 32 per byte vector of `codes` in element order, packed four in
/// three bytes as three whole 32-byte vectors at `p` (streaming when `STREAM`): no store splits
/// a vector, so none crosses a cache line where `p` is aligned, and streaming skips reading the
/// destination's lines first.
///
/// # Safety
/// AVX2; 96 writable bytes at `p`, aligned to 32 when `STREAM`.
#[inline(always)]
pub(super) unsafe fn put_u6x4<const STREAM: bool>(codes: [__m256i; 4], p: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        // Each vector's 24 bytes are its 32-bit parts 0-2 and 4-6; the output's three vectors
        // take them in order, eight parts each.
        // (Macros, not closures: a closure's intrinsics may not inline into the
        // `#[target_feature]` loop.)
        let [a, b, c, d] = [
            u6_groups(codes[0]),
            u6_groups(codes[1]),
            u6_groups(codes[2]),
            u6_groups(codes[3]),
        ];
        macro_rules! from {
            ($x:expr, [$($part:expr),*]) => {
                _mm256_permutevar8x32_epi32($x, _mm256_setr_epi32($($part),*))
            };
        }
        let first = _mm256_blend_epi32::<0b1100_0000>(
            from!(a, [0, 1, 2, 4, 5, 6, 0, 0]),
            from!(b, [0, 0, 0, 0, 0, 0, 0, 1]),
        );
        let second = _mm256_blend_epi32::<0b1111_0000>(
            from!(b, [2, 4, 5, 6, 0, 0, 0, 0]),
            from!(c, [0, 0, 0, 0, 0, 1, 2, 4]),
        );
        let third = _mm256_blend_epi32::<0b1111_1100>(
            from!(c, [5, 6, 0, 0, 0, 0, 0, 0]),
            from!(d, [0, 0, 0, 1, 2, 4, 5, 6]),
        );
        first.store::<STREAM>(p);
        second.store::<STREAM>(p.add(32));
        third.store::<STREAM>(p.add(64));
    }
}

impl Vector for __m256i {
    const LANES: usize = 8;
    type Mask = __m256i;
    const LOOKUP_BITS: usize = 8;

    // Every method: the caller guarantees AVX2 + F16C (checked once by `kernel`) and the memory
    // named in the trait's contract; each body is one or a few intrinsics.
    avx2! {
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_loadu_si256(p.cast()) }
        }
        unsafe fn load_u16(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast())) }
        }
        unsafe fn load_u8(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast())) }
        }
        unsafe fn store<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract (aligned to 32 bytes when streaming).
            unsafe {
                if STREAM {
                    _mm256_stream_si256(p.cast(), self)
                } else {
                    _mm256_storeu_si256(p.cast(), self)
                }
            }
        }
        unsafe fn store_u16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe { _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(a, b)).store::<STREAM>(p) }
        }
        unsafe fn store_u8<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe { bytes4(a, b, c, d).store::<STREAM>(p) }
        }

        unsafe fn load_u4(p: *const u8) -> [Self; 2] {
            // SAFETY: the caller's contract: 8 readable bytes.
            unsafe {
                // Each byte b in a 16-bit lane, made into the bytes [b & 0xF, b >> 4]: the 16
                // codes in element order, then widened 8 at a time.
                let w = _mm_cvtepu8_epi16(_mm_loadl_epi64(p.cast()));
                let low = _mm_and_si128(w, _mm_set1_epi16(0xF));
                let high = _mm_slli_epi16::<4>(_mm_and_si128(w, _mm_set1_epi16(0xF0)));
                let codes = _mm_or_si128(low, high);
                [_mm256_cvtepu8_epi32(codes), _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(codes, codes))]
            }
        }
        unsafe fn load_u6(p: *const u8) -> [Self; 4] {
            // SAFETY: the caller's contract: 24 readable bytes.
            unsafe {
                let codes = codes_u6(p);
                let (lo, hi) = (_mm256_castsi256_si128(codes), _mm256_extracti128_si256::<1>(codes));
                [
                    _mm256_cvtepu8_epi32(lo),
                    _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(lo, lo)),
                    _mm256_cvtepu8_epi32(hi),
                    _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(hi, hi)),
                ]
            }
        }
        unsafe fn lookup_u16<const BITS: usize, const STREAM: bool>(
            s: *const u8,
            d: *mut u8,
            table: &Codes,
        ) {
            // SAFETY: the caller's contract: 32 codes at `s` (16, 24 or 32 bytes), 64 bytes at
            // `d`; `table`'s byte tables are 128 bytes each (eight rows of 16).
            unsafe {
                // Sixteen entries a row: their low bytes in one byte table and their high bytes
                // in another (`Codes`), each looked up by the codes as bytes in element order.
                let codes = if BITS == 4 {
                    // Byte j's low nibble, then its high.
                    let packed = _mm_loadu_si128(s.cast());
                    let mask = _mm_set1_epi8(0xF);
                    let (lo, hi) = (_mm_and_si128(packed, mask), _mm_and_si128(_mm_srli_epi16::<4>(packed), mask));
                    _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(_mm_unpacklo_epi8(lo, hi)), _mm_unpackhi_epi8(lo, hi))
                } else if BITS == 6 {
                    codes_u6(s)
                } else {
                    _mm256_loadu_si256(s.cast())
                };
                let (l, h) = if BITS == 4 {
                    (pick::<1>(&table.low, codes), pick::<1>(&table.high, codes))
                } else if BITS == 6 {
                    (pick::<4>(&table.low, codes), pick::<4>(&table.high, codes))
                } else {
                    // Eight bits: the low seven looked up, the top one (a sign) set in the
                    // entry's, and the one sign-set entry that stands for another value
                    // (`Codes::recode`) replaced.
                    let magnitude = _mm256_and_si256(codes, _mm256_set1_epi8(0x7F));
                    let sign = _mm256_and_si256(codes, _mm256_set1_epi8(0x80u8 as i8));
                    let (l, h) = (pick::<8>(&table.low, magnitude), pick::<8>(&table.high, magnitude));
                    let h = _mm256_or_si256(h, sign);
                    match table.recode {
                        Some((from, to)) => {
                            let ([fl, fh], [tl, th]) = (from.to_le_bytes(), to.to_le_bytes());
                            let byte = |b: u8| _mm256_set1_epi8(b as i8);
                            let hit = _mm256_and_si256(_mm256_cmpeq_epi8(l, byte(fl)), _mm256_cmpeq_epi8(h, byte(fh)));
                            (_mm256_blendv_epi8(l, byte(tl), hit), _mm256_blendv_epi8(h, byte(th), hit))
                        }
                        None => (l, h),
                    }
                };
                // Each entry's two bytes side by side: codes 0-7 | 16-23 and 8-15 | 24-31,
                // put back in order.
                let (a, b) = (_mm256_unpacklo_epi8(l, h), _mm256_unpackhi_epi8(l, h));
                _mm256_permute2x128_si256::<0x20>(a, b).store::<STREAM>(d);
                _mm256_permute2x128_si256::<0x31>(a, b).store::<STREAM>(d.add(32));
            }
        }
        unsafe fn store_u4<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract: 16 writable bytes, aligned when streaming.
            unsafe { put_u4::<STREAM>(bytes4(a, b, c, d), p) }
        }
        unsafe fn store_u6(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract: 24 writable bytes.
            unsafe { put_u6(bytes4(a, b, c, d), p) }
        }

        unsafe fn load_f64_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 64 readable bytes.
            unsafe {
                // vcvtpd2ps: nearest-even; NaN quieted with its top payload bits, as cvtsd2ss.
                let lo = _mm256_cvtpd_ps(_mm256_loadu_pd(p.cast()));
                let hi = _mm256_cvtpd_ps(_mm256_loadu_pd(p.add(32).cast()));
                _mm256_castps_si256(_mm256_insertf128_ps::<1>(_mm256_castps128_ps256(lo), hi))
            }
        }
        unsafe fn load_f64_as_f32_odd(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 64 readable bytes.
            unsafe {
                let lo = f64x4_to_f32_odd(_mm256_loadu_pd(p.cast()));
                let hi = f64x4_to_f32_odd(_mm256_loadu_pd(p.add(32).cast()));
                _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi)
            }
        }
        unsafe fn store_f32_as_f64<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract: 64 writable bytes.
            unsafe {
                let x = _mm256_castsi256_ps(self);
                let lo = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
                let hi = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)));
                lo.store::<STREAM>(p);
                hi.store::<STREAM>(p.add(32));
            }
        }
        unsafe fn load_i64_low(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 64 readable bytes.
            unsafe { i64_halves(p).0 }
        }
        unsafe fn load_i64_high(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 64 readable bytes.
            unsafe { i64_halves(p).1 }
        }
        unsafe fn store_i32_as_i64<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract: 64 writable bytes.
            unsafe {
                _mm256_cvtepi32_epi64(_mm256_castsi256_si128(self)).store::<STREAM>(p);
                _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(self)).store::<STREAM>(p.add(32));
            }
        }

        unsafe fn splat(x: u32) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_set1_epi32(x as i32) }
        }
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_add_epi32(self, o) }
        }
        unsafe fn sub(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_sub_epi32(self, o) }
        }
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_and_si256(self, o) }
        }
        unsafe fn or(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_or_si256(self, o) }
        }
        unsafe fn shl<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_slli_epi32::<K>(self) }
        }
        unsafe fn shr<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_srli_epi32::<K>(self) }
        }
        unsafe fn sra<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_srai_epi32::<K>(self) }
        }
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_xor_si256(self, o) }
        }
        unsafe fn min_i32(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_min_epi32(self, o) }
        }
        unsafe fn max_i32(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_max_epi32(self, o) }
        }
        unsafe fn gt_i32(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cmpgt_epi32(self, o) }
        }
        unsafe fn eq(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cmpeq_epi32(self, o) }
        }
        unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_blendv_epi8(no, yes, m) }
        }
        unsafe fn none(m: Self::Mask) -> bool {
            // SAFETY: the caller's contract.
            unsafe { _mm256_testz_si256(m, m) == 1 }
        }

        unsafe fn f32_add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(self), _mm256_castsi256_ps(o)))
            }
        }
        unsafe fn f32_max(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm256_castps_si256(_mm256_max_ps(_mm256_castsi256_ps(self), _mm256_castsi256_ps(o)))
            }
        }
        unsafe fn f32_mul(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(self), _mm256_castsi256_ps(o)))
            }
        }
        unsafe fn cvtt_f32_i32(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cvttps_epi32(_mm256_castsi256_ps(self)) }
        }
        unsafe fn i32_to_f32(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm256_castps_si256(_mm256_cvtepi32_ps(self)) }
        }

        unsafe fn load_f16_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 16 readable bytes.
            unsafe { _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(p.cast()))) }
        }
        unsafe fn load_e5m2_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 8 readable bytes.
            unsafe {
                let halves = _mm_slli_epi16::<8>(_mm_cvtepu8_epi16(_mm_loadl_epi64(p.cast())));
                _mm256_castps_si256(_mm256_cvtph_ps(halves))
            }
        }
        unsafe fn store_f16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe {
                let h = |x: Self| _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_castsi256_ps(x));
                _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(h(a)), h(b)).store::<STREAM>(p)
            }
        }
    }
}

/// Four f64 → f32 rounded to odd (truncate, then set the last bit where inexact). AVX2 has no
/// truncating conversion, so the nearest-even one is undone where it rounded away from zero:
/// the bits step back one ulp towards zero (inf back to the largest finite value).
/// The low and the high halves of eight little-endian i64 at `p`, each in element order.
///
/// # Safety
/// The CPU must have AVX2; 64 bytes at `p` must be readable.
#[inline(always)]
unsafe fn i64_halves(p: *const u8) -> (__m256i, __m256i) {
    // SAFETY: the caller's contract.
    unsafe {
        // Each 128-bit half of a load gets its elements' low words, then their high words.
        let split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        let a = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(p.cast()), split);
        let b = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(p.add(32).cast()), split);
        (
            _mm256_permute2x128_si256::<0x20>(a, b),
            _mm256_permute2x128_si256::<0x31>(a, b),
        )
    }
}

#[inline(always)]
unsafe fn f64x4_to_f32_odd(x: __m256d) -> __m128i {
    // SAFETY: the caller's contract (AVX2).
    unsafe {
        let t = _mm256_cvtpd_ps(x);
        let back = _mm256_cvtps_pd(t);
        let abs = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFF_FFFF_FFFF_FFFF));
        // Ordered compares: false for NaN, which converts as it is.
        let away = _mm256_cmp_pd::<_CMP_GT_OQ>(_mm256_and_pd(back, abs), _mm256_and_pd(x, abs));
        let inexact = _mm256_cmp_pd::<_CMP_NEQ_OQ>(back, x);
        // The low dword of each 64-bit mask lane (all ones or zero), in order.
        let narrow = |m: __m256d| {
            let even = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), even))
        };
        let truncated = _mm_add_epi32(_mm_castps_si128(t), narrow(away)); // all ones = -1
        _mm_or_si128(truncated, _mm_and_si128(narrow(inexact), _mm_set1_epi32(1)))
    }
}

entry_points!(__m256i, "avx2,f16c", avx2_available, "AVX2 and F16C");
