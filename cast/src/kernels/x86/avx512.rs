//! AVX-512 (F, BW, VL, DQ): [`Vector`] over `__m512i` (sixteen lanes), with compares into mask
//! registers.

use core::arch::x86_64::*;

use super::super::steps::{self, Step};
use super::super::vector::{spread_u6, squeeze_u6, Codes, Vector};
use super::super::KeyRun;

/// Marks every method `#[inline(always)]`, so that it inlines into the `#[target_feature]` loop.
macro_rules! avx512 {
    ($($item:item)*) => {
        $(
            #[inline(always)]
            $item
        )*
    };
}

/// Two 32-byte halves as one 64-byte vector.
#[inline(always)]
pub(super) unsafe fn join2(lo: __m256i, hi: __m256i) -> __m512i {
    // SAFETY: the caller's contract (AVX-512).
    unsafe { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi) }
}

/// Four vectors of values below 2^8 as 64 bytes in lane order: two rounds of packing (which
/// interleave the 128-bit lanes), then one dword permutation to undo it (lane j of the packed
/// vector holds dwords [a_j, b_j, c_j, d_j]).
#[inline(always)]
unsafe fn bytes4(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m512i {
    // SAFETY: the caller's contract (AVX-512).
    unsafe {
        let packed = _mm512_packus_epi16(_mm512_packus_epi32(a, b), _mm512_packus_epi32(c, d));
        let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        _mm512_permutexvar_epi32(order, packed)
    }
}

/// 64 six-bit codes packed in 48 bytes at `p`, one per byte in element order.
///
/// # Safety
/// AVX-512; 48 readable bytes at `p` (the masked load reads no more).
#[inline(always)]
unsafe fn codes_u6(p: *const u8) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        let raw = _mm512_maskz_loadu_epi8(SIX_BIT_BYTES, p.cast());
        // Twelve bytes (four groups of three) into each 128-bit lane, then each group into a
        // 32-bit lane of its own.
        let spread = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0, 9, 10, 11, 0),
            raw,
        );
        let groups = _mm512_shuffle_epi8(
            spread,
            _mm512_broadcast_i32x4(_mm_setr_epi8(
                0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1,
            )),
        );
        spread_u6(groups)
    }
}

/// Writes 64 codes below 16, one per byte of `codes` in element order, packed two per byte (32
/// bytes) at `p`, streaming when `STREAM`.
///
/// # Safety
/// AVX-512; 32 writable bytes at `p`, aligned to 32 when `STREAM`.
#[inline(always)]
pub(super) unsafe fn put_u4<const STREAM: bool>(codes: __m512i, p: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        // Codes [lo, hi] in a 16-bit lane: its low byte ORed with the lane shifted right by 4 is
        // lo | hi << 4; vpmovwb keeps the low bytes.
        let bytes = _mm512_cvtepi16_epi8(_mm512_or_si512(codes, _mm512_srli_epi16::<4>(codes)));
        if STREAM {
            _mm256_stream_si256(p.cast(), bytes)
        } else {
            _mm256_storeu_si256(p.cast(), bytes)
        }
    }
}

/// Writes 64 codes below 64, one per byte of `codes` in element order, packed four in three
/// bytes (48 bytes) at `p`.
///
/// # Safety
/// AVX-512; 48 writable bytes at `p` (the masked store writes no more).
#[inline(always)]
pub(super) unsafe fn put_u6(codes: __m512i, p: *mut u8) {
    // SAFETY: the caller's contract.
    unsafe {
        let groups = squeeze_u6(codes);
        // The three low bytes of each 32-bit lane, twelve per 128-bit lane, then the four lanes'
        // twelve bytes side by side.
        let lanes = _mm512_shuffle_epi8(
            groups,
            _mm512_broadcast_i32x4(_mm_setr_epi8(
                0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,
            )),
        );
        let packed = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0),
            lanes,
        );
        _mm512_mask_storeu_epi8(p.cast(), SIX_BIT_BYTES, packed)
    }
}

/// The bytes of 64 six-bit codes: the first 48 of a vector.
const SIX_BIT_BYTES: __mmask64 = (1 << 48) - 1;

impl Vector for __m512i {
    const LANES: usize = 16;
    type Mask = __mmask16;
    // Six-bit codes by one two-register permute, eight-bit ones by `lookup_u8_codes`.
    const LOOKUP_BITS: usize = 8;

    // Every method: the caller guarantees the AVX-512 subsets (checked once by `kernel`) and the
    // memory named in the trait's contract; each body is one or a few intrinsics.
    avx512! {
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_loadu_si512(p.cast()) }
        }
        unsafe fn load_u16(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast())) }
        }
        unsafe fn load_u8(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast())) }
        }
        unsafe fn store<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract (aligned to 64 bytes when streaming).
            unsafe {
                if STREAM {
                    _mm512_stream_si512(p.cast(), self)
                } else {
                    _mm512_storeu_si512(p.cast(), self)
                }
            }
        }
        unsafe fn store_u16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe { join2(_mm512_cvtepi32_epi16(a), _mm512_cvtepi32_epi16(b)).store::<STREAM>(p) }
        }
        unsafe fn store_u8<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe { bytes4(a, b, c, d).store::<STREAM>(p) }
        }

        unsafe fn load_u4(p: *const u8) -> [Self; 2] {
            // SAFETY: the caller's contract: 16 readable bytes.
            unsafe {
                // Each byte b in a 16-bit lane, made into the bytes [b & 0xF, b >> 4]: the 32
                // codes in element order, then widened 16 at a time.
                let w = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast()));
                let low = _mm256_and_si256(w, _mm256_set1_epi16(0xF));
                let high = _mm256_slli_epi16::<4>(_mm256_and_si256(w, _mm256_set1_epi16(0xF0)));
                let codes = _mm256_or_si256(low, high);
                [
                    _mm512_cvtepu8_epi32(_mm256_castsi256_si128(codes)),
                    _mm512_cvtepu8_epi32(_mm256_extracti128_si256::<1>(codes)),
                ]
            }
        }
        unsafe fn load_u6(p: *const u8) -> [Self; 4] {
            // SAFETY: the caller's contract: 48 readable bytes.
            unsafe {
                let codes = codes_u6(p);
                [
                    _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<0>(codes)),
                    _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<1>(codes)),
                    _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<2>(codes)),
                    _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32::<3>(codes)),
                ]
            }
        }
        unsafe fn lookup_u16<const BITS: usize, const STREAM: bool>(
            s: *const u8,
            d: *mut u8,
            table: &Codes,
        ) {
            if BITS == 8 {
                // SAFETY: the caller's contract: 64 codes at `s`, 128 bytes at `d`.
                return unsafe { lookup_u8_codes::<STREAM>(s, d, table) };
            }
            // SAFETY: the caller's contract: 64 codes at `s`, 128 bytes at `d`; `table` holds
            // two vectors of 32 entries.
            unsafe {
                let codes = if BITS == 6 {
                    codes_u6(s)
                } else {
                    // Each byte b in a 16-bit lane, made into the bytes [b & 0xF, b >> 4].
                    let w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(s.cast()));
                    let low = _mm512_and_si512(w, _mm512_set1_epi16(0xF));
                    let high = _mm512_slli_epi16::<4>(_mm512_and_si512(w, _mm512_set1_epi16(0xF0)));
                    _mm512_or_si512(low, high)
                };
                let (t0, t1) = (
                    _mm512_loadu_si512(table.entries.as_ptr().cast()),
                    _mm512_loadu_si512(table.entries.as_ptr().add(32).cast()),
                );
                // One permute picks each of 32 codes' entries among all 64 (index bit 5 chooses
                // the register).
                let entries = |half: __m256i| {
                    _mm512_permutex2var_epi16(t0, _mm512_cvtepu8_epi16(half), t1)
                };
                entries(_mm512_castsi512_si256(codes)).store::<STREAM>(d);
                entries(_mm512_extracti64x4_epi64::<1>(codes)).store::<STREAM>(d.add(64));
            }
        }
        unsafe fn store_u4<const STREAM: bool>(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract: 32 writable bytes, aligned when streaming.
            unsafe { put_u4::<STREAM>(bytes4(a, b, c, d), p) }
        }
        unsafe fn store_u6(a: Self, b: Self, c: Self, d: Self, p: *mut u8) {
            // SAFETY: the caller's contract: 48 writable bytes.
            unsafe { put_u6(bytes4(a, b, c, d), p) }
        }

        unsafe fn load_f64_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 128 readable bytes.
            unsafe {
                let (lo, hi) = (_mm512_loadu_pd(p.cast()), _mm512_loadu_pd(p.add(64).cast()));
                let f = _mm512_insertf32x8::<1>(
                    _mm512_castps256_ps512(_mm512_cvtpd_ps(lo)),
                    _mm512_cvtpd_ps(hi),
                );
                _mm512_castps_si512(f)
            }
        }
        unsafe fn load_f64_as_f32_odd(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 128 readable bytes.
            unsafe {
                let (lo, hi) = (_mm512_loadu_pd(p.cast()), _mm512_loadu_pd(p.add(64).cast()));
                // Truncate, then set the last bit where inexact.
                let half = |x: __m512d| {
                    let t = _mm512_cvt_roundpd_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x);
                    let inexact = _mm512_cmp_pd_mask::<_CMP_NEQ_OQ>(_mm512_cvtps_pd(t), x);
                    let t = _mm512_castsi512_si256(_mm512_castps_si512(_mm512_castps256_ps512(t)));
                    _mm256_mask_or_epi32(t, inexact, t, _mm256_set1_epi32(1))
                };
                _mm512_inserti32x8::<1>(_mm512_castsi256_si512(half(lo)), half(hi))
            }
        }
        unsafe fn store_f32_as_f64<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract: 128 writable bytes.
            unsafe {
                let x = _mm512_castsi512_ps(self);
                let lo = _mm512_castpd_si512(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
                let hi = _mm512_castpd_si512(_mm512_cvtps_pd(_mm256_castpd_ps(
                    _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)),
                )));
                lo.store::<STREAM>(p);
                hi.store::<STREAM>(p.add(64));
            }
        }
        unsafe fn load_i64_low(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 128 readable bytes.
            unsafe {
                let lo = _mm512_cvtepi64_epi32(_mm512_loadu_si512(p.cast()));
                let hi = _mm512_cvtepi64_epi32(_mm512_loadu_si512(p.add(64).cast()));
                join2(lo, hi)
            }
        }
        unsafe fn load_i64_high(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 128 readable bytes.
            unsafe {
                let lo = _mm512_srli_epi64::<32>(_mm512_loadu_si512(p.cast()));
                let hi = _mm512_srli_epi64::<32>(_mm512_loadu_si512(p.add(64).cast()));
                join2(_mm512_cvtepi64_epi32(lo), _mm512_cvtepi64_epi32(hi))
            }
        }
        unsafe fn store_i32_as_i64<const STREAM: bool>(self, p: *mut u8) {
            // SAFETY: the caller's contract: 128 writable bytes.
            unsafe {
                _mm512_cvtepi32_epi64(_mm512_castsi512_si256(self)).store::<STREAM>(p);
                _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(self)).store::<STREAM>(p.add(64));
            }
        }

        unsafe fn splat(x: u32) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_set1_epi32(x as i32) }
        }
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_add_epi32(self, o) }
        }
        unsafe fn sub(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_sub_epi32(self, o) }
        }
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_and_si512(self, o) }
        }
        unsafe fn or(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_or_si512(self, o) }
        }
        // The immediate forms take a `u32` count, the trait an `i32`; a constant count in a
        // register compiles to the same immediate shift (LLVM folds it).
        unsafe fn shl<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_sll_epi32(self, _mm_cvtsi32_si128(K)) }
        }
        unsafe fn shr<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_srl_epi32(self, _mm_cvtsi32_si128(K)) }
        }
        unsafe fn sra<const K: i32>(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_sra_epi32(self, _mm_cvtsi32_si128(K)) }
        }
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_xor_si512(self, o) }
        }
        unsafe fn min_i32(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_min_epi32(self, o) }
        }
        unsafe fn max_i32(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_max_epi32(self, o) }
        }
        unsafe fn gt_i32(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cmpgt_epi32_mask(self, o) }
        }
        unsafe fn eq(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cmpeq_epi32_mask(self, o) }
        }
        unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_mask_blend_epi32(m, no, yes) }
        }
        unsafe fn none(m: Self::Mask) -> bool {
            m == 0
        }

        unsafe fn f32_add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(self), _mm512_castsi512_ps(o)))
            }
        }
        unsafe fn f32_max(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(self), _mm512_castsi512_ps(o)))
            }
        }
        unsafe fn f32_mul(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(self), _mm512_castsi512_ps(o)))
            }
        }
        unsafe fn cvtt_f32_i32(self) -> Self {
            // vcvttps2dq: NaN and out-of-range give 0x80000000.
            // SAFETY: the caller's contract.
            unsafe { _mm512_cvttps_epi32(_mm512_castsi512_ps(self)) }
        }
        unsafe fn i32_to_f32(self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { _mm512_castps_si512(_mm512_cvtepi32_ps(self)) }
        }

        unsafe fn load_f16_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 32 readable bytes.
            unsafe { _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(p.cast()))) }
        }
        unsafe fn load_e5m2_as_f32(p: *const u8) -> Self {
            // SAFETY: the caller's contract: 16 readable bytes.
            unsafe {
                let halves =
                    _mm256_slli_epi16::<8>(_mm256_cvtepu8_epi16(_mm_loadu_si128(p.cast())));
                _mm512_castps_si512(_mm512_cvtph_ps(halves))
            }
        }
        unsafe fn store_f16<const STREAM: bool>(a: Self, b: Self, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe {
                let h = |x: Self| {
                    _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                        _mm512_castsi512_ps(x),
                    )
                };
                join2(h(a), h(b)).store::<STREAM>(p)
            }
        }
    }
}

/// [`Vector::lookup_u16`] of 64 eight-bit codes (float8): each code's low seven bits looked up
/// among the 128 entries by two two-register permutes (entries 0-63 and 64-127, index bit 5
/// choosing the register) and a blend on bit 6, its top bit set as the entry's sign, and the
/// one sign-set entry that stands for another value replaced (`Codes::recode`): far faster than
/// the plain loop it replaced, and than computing float8_e4m3/e3m4 values, which fell behind
/// memory speed where memory was fast.
///
/// # Safety
/// The CPU has the AVX-512 subsets of this module; 64 bytes readable at `s`, 128 writable at
/// `d` (aligned to 64 when `STREAM`).
#[inline(always)]
unsafe fn lookup_u8_codes<const STREAM: bool>(s: *const u8, d: *mut u8, table: &Codes) {
    // SAFETY: the caller's contract; `table.entries` holds four vectors of 32 entries. (No
    // closures: one is compiled apart from this function's target features when not inlined, and
    // every intrinsic in it becomes a call.)
    unsafe {
        let e = table.entries.as_ptr();
        let t = [
            _mm512_loadu_si512(e.cast()),
            _mm512_loadu_si512(e.add(32).cast()),
            _mm512_loadu_si512(e.add(64).cast()),
            _mm512_loadu_si512(e.add(96).cast()),
        ];
        let codes = _mm512_loadu_si512(s.cast());
        u8_entries(_mm512_castsi512_si256(codes), &t, table.recode).store::<STREAM>(d);
        u8_entries(_mm512_extracti64x4_epi64::<1>(codes), &t, table.recode)
            .store::<STREAM>(d.add(64));
    }
}

/// The entries of 32 eight-bit codes (`lookup_u8_codes`), `t` the table's four vectors.
///
/// # Safety
/// The CPU has the AVX-512 subsets of this module.
#[inline(always)]
unsafe fn u8_entries(half: __m256i, t: &[__m512i; 4], recode: Option<(u16, u16)>) -> __m512i {
    // SAFETY: the caller's contract.
    unsafe {
        let idx = _mm512_cvtepu8_epi16(half);
        let low = _mm512_permutex2var_epi16(t[0], idx, t[1]);
        let high = _mm512_permutex2var_epi16(t[2], idx, t[3]);
        let upper = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
        let entry = _mm512_mask_blend_epi16(upper, low, high);
        let sign = _mm512_slli_epi16::<8>(_mm512_and_si512(idx, _mm512_set1_epi16(0x80)));
        let value = _mm512_or_si512(entry, sign);
        match recode {
            Some((from, to)) => {
                let hit = _mm512_cmpeq_epi16_mask(value, _mm512_set1_epi16(from as i16));
                _mm512_mask_mov_epi16(value, hit, _mm512_set1_epi16(to as i16))
            }
            None => value,
        }
    }
}

entry_points!(
    __m512i,
    "avx512f,avx512bw,avx512vl,avx512dq",
    avx512_available,
    "the AVX-512 subsets"
);
