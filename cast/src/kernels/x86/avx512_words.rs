//! AVX-512's instantiation of the 16-bit-lane narrowing (`words.rs`): [`Words`] over `__m512i`
//! (32 lanes), with AVX-512BW's variable word shifts and compares into mask registers, 64
//! elements a step.

use core::arch::x86_64::*;

use super::super::steps::Step;
use super::super::words::{self, inline_all, Words};
use super::avx512::{join2, put_u4, put_u6};

/// 32 16-bit lanes.
#[derive(Clone, Copy)]
struct W512(__m512i);

// Every method: the caller guarantees the AVX-512 subsets (checked once by `kernel`); each body
// is one or a few intrinsics.
impl Words for W512 {
    const LANES: usize = 32;
    const SKIPS_RARE_LANES: bool = false;
    type Mask = __mmask32;
    inline_all! {
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_loadu_si512(p.cast())) }
        }
        unsafe fn put<const STREAM: bool>(low: Self, high: Self, bits: usize, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe {
                let bytes = join2(_mm512_cvtepi16_epi8(low.0), _mm512_cvtepi16_epi8(high.0));
                match bits {
                    8 if STREAM => _mm512_stream_si512(p.cast(), bytes),
                    8 => _mm512_storeu_si512(p.cast(), bytes),
                    6 => put_u6(bytes, p),
                    _ => put_u4::<STREAM>(bytes, p),
                }
            }
        }
        unsafe fn splat(v: u16) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_set1_epi16(v as i16)) }
        }
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_and_si512(self.0, o.0)) }
        }
        unsafe fn or(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_or_si512(self.0, o.0)) }
        }
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_xor_si512(self.0, o.0)) }
        }
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_add_epi16(self.0, o.0)) }
        }
        unsafe fn min(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_min_epu16(self.0, o.0)) }
        }
        unsafe fn max(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_max_epu16(self.0, o.0)) }
        }
        unsafe fn shr(self, k: u16) -> Self {
            // SAFETY: the caller's contract. (A constant count: compiled as an immediate shift.)
            unsafe { W512(_mm512_srlv_epi16(self.0, _mm512_set1_epi16(k as i16))) }
        }
        unsafe fn quanta(self, q: words::Quanta) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                match q.buckets.as_ref() {
                    Some(b) => self.look_up(b),
                    None => words::shifted_quanta(self, q),
                }
            }
        }
        unsafe fn below(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cmplt_epu16_mask(self.0, o.0) }
        }
        unsafe fn above(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cmpgt_epu16_mask(self.0, o.0) }
        }
        unsafe fn eq(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm512_cmpeq_epu16_mask(self.0, o.0) }
        }
        unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_mask_blend_epi16(m, no.0, yes.0)) }
        }
        unsafe fn none(m: Self::Mask) -> bool {
            m == 0
        }
        unsafe fn counted(self, r: words::Rule) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                match r.buckets() {
                    Some(b) => self.look_up(b),
                    None => words::count_thresholds(self, r),
                }
            }
        }
    }
}

impl W512 {
    /// The values of `b`'s step function at magnitudes `self`: two lookups of 64 entries by
    /// the bucket, one picked by whether the magnitude is its bucket's first.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F and BW.
    #[inline(always)]
    unsafe fn look_up(self, b: &words::Buckets) -> Self {
        // SAFETY: the caller's contract; each table is 64 entries, two vectors.
        unsafe {
            let table =
                |t: &[u16; 64], half: usize| _mm512_loadu_si512(t.as_ptr().add(32 * half).cast());
            let offset = _mm512_subs_epu16(self.0, _mm512_set1_epi16(b.base as i16));
            let bucket = _mm512_min_epu16(
                _mm512_srlv_epi16(offset, _mm512_set1_epi16(b.shift as i16)),
                _mm512_set1_epi16(63),
            );
            let rest = _mm512_permutex2var_epi16(table(&b.rest, 0), bucket, table(&b.rest, 1));
            let first = _mm512_permutex2var_epi16(table(&b.first, 0), bucket, table(&b.first, 1));
            let within = _mm512_set1_epi16(((1u32 << b.shift) - 1) as i16);
            let at_first = _mm512_testn_epi16_mask(offset, within);
            W512(_mm512_mask_blend_epi16(at_first, rest, first))
        }
    }
}

impl words::ShiftRounding for W512 {
    inline_all! {
        unsafe fn sub_or_zero(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W512(_mm512_subs_epu16(self.0, o.0)) }
        }
        unsafe fn shr_round(self, s1: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                // (x + 2^(s-1) - 1 + the kept part's lowest bit) >> s, s = s1 + 1.
                let one = _mm512_set1_epi16(1);
                let s = _mm512_add_epi16(s1.0, one);
                let half = _mm512_sub_epi16(_mm512_sllv_epi16(one, s1.0), one);
                let odd = _mm512_and_si512(_mm512_srlv_epi16(self.0, s), one);
                let sum = _mm512_add_epi16(_mm512_add_epi16(self.0, half), odd);
                W512(_mm512_srlv_epi16(sum, s))
            }
        }
    }
}

/// Converts `n` elements (a multiple of [`words::step_elements`]) by step `K`'s pair.
///
/// # Safety
/// As [`words::run`]: the CPU must have the AVX-512 subsets.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe { words::run::<W512, K, STREAM>(s, d, n) }
}

/// The word-lane kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
pub(super) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    super::drive_loops::<K, ALWAYS_STREAM>(
        src,
        dst,
        words::step_elements::<W512>(<K::D as crate::lanes::Lane>::BITS),
        super::avx512_available(),
        [run::<K, false>, run::<K, true>],
    );
}
