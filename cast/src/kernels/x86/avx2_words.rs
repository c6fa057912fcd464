//! AVX2's instantiation of the 16-bit-lane narrowing (`words.rs`): [`Words`] over `__m256i` (16
//! lanes), and the loop that converts 32 elements a step (128 into 6-bit codes). AVX2 has no
//! variable 16-bit shifts: the rounding below the smallest normal adds in float32 instead
//! ([`words::Quanta::float_bits`]).

use core::arch::x86_64::*;

use super::super::steps::Step;
use super::super::words::{self, inline_all, Words};
use super::avx2::{put_u4, put_u6, put_u6x4};

/// 16 16-bit lanes.
#[derive(Clone, Copy)]
struct W256(__m256i);

// Every method: the caller guarantees AVX2 (checked once by `kernel`); each body is one or a few
// intrinsics.
impl Words for W256 {
    const LANES: usize = 16;
    const SKIPS_RARE_LANES: bool = false;
    type Mask = __m256i;
    inline_all! {
        unsafe fn load(p: *const u8) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_loadu_si256(p.cast())) }
        }
        unsafe fn put<const STREAM: bool>(low: Self, high: Self, bits: usize, p: *mut u8) {
            // SAFETY: the caller's contract.
            unsafe {
                // Packing interleaves the 128-bit lanes; one permutation of 64-bit parts undoes
                // it.
                let bytes = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(low.0, high.0));
                match bits {
                    8 if STREAM => _mm256_stream_si256(p.cast(), bytes),
                    8 => _mm256_storeu_si256(p.cast(), bytes),
                    6 => put_u6(bytes, p),
                    _ => put_u4::<STREAM>(bytes, p),
                }
            }
        }
        unsafe fn put6<const STREAM: bool>(codes: [Self; 8], p: *mut u8) {
            // SAFETY: the caller's contract (96 bytes, aligned to 32 when streaming).
            unsafe {
                let mut bytes = [_mm256_setzero_si256(); 4];
                for (k, b) in bytes.iter_mut().enumerate() {
                    let (low, high) = (codes[2 * k].0, codes[2 * k + 1].0);
                    *b = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(low, high));
                }
                put_u6x4::<STREAM>(bytes, p)
            }
        }
        unsafe fn splat(v: u16) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_set1_epi16(v as i16)) }
        }
        unsafe fn and(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_and_si256(self.0, o.0)) }
        }
        unsafe fn or(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_or_si256(self.0, o.0)) }
        }
        unsafe fn xor(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_xor_si256(self.0, o.0)) }
        }
        unsafe fn add(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_add_epi16(self.0, o.0)) }
        }
        unsafe fn min(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_min_epu16(self.0, o.0)) }
        }
        unsafe fn max(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_max_epu16(self.0, o.0)) }
        }
        unsafe fn shr(self, k: u16) -> Self {
            // SAFETY: the caller's contract. (A constant count: compiled as an immediate shift.)
            unsafe { W256(_mm256_srl_epi16(self.0, _mm_cvtsi32_si128(i32::from(k)))) }
        }
        unsafe fn quanta(self, q: words::Quanta) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                // Each magnitude widened into a float32 (scaled, see `Quanta::widen`; the two
                // halves in the order the pack below undoes), plus 2^23 quanta at that scale: the
                // sum's bits less that number's count the quanta, rounded as float32 rounds, to
                // nearest-even (9 instructions where a variable shift by products takes 15).
                // Counts past 2^16 (overflow, inf, NaN) saturate: the caller's `min` or select
                // leaves them.
                let zero = _mm256_setzero_si256();
                let down = _mm_cvtsi32_si128(16 - q.widen as i32);
                let low = _mm256_srl_epi32(_mm256_unpacklo_epi16(zero, self.0), down);
                let high = _mm256_srl_epi32(_mm256_unpackhi_epi16(zero, self.0), down);
                let bits = _mm256_set1_epi32(q.float_bits as i32);
                let whole = _mm256_castsi256_ps(bits);
                let low = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(low), whole));
                let high = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(high), whole));
                let (low, high) = (_mm256_sub_epi32(low, bits), _mm256_sub_epi32(high, bits));
                W256(_mm256_packus_epi32(low, high))
            }
        }
        unsafe fn below(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract (lanes below 2^15: the signed compare is unsigned).
            unsafe { _mm256_cmpgt_epi16(o.0, self.0) }
        }
        unsafe fn above(self, o: Self) -> Self::Mask {
            // SAFETY: as `below`.
            unsafe { _mm256_cmpgt_epi16(self.0, o.0) }
        }
        unsafe fn eq(self, o: Self) -> Self::Mask {
            // SAFETY: the caller's contract.
            unsafe { _mm256_cmpeq_epi16(self.0, o.0) }
        }
        unsafe fn select(m: Self::Mask, yes: Self, no: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_blendv_epi8(no.0, yes.0, m)) }
        }
        unsafe fn count(self, m: Self::Mask) -> Self {
            // SAFETY: the caller's contract (a mask lane is -1 where it holds).
            unsafe { W256(_mm256_sub_epi16(self.0, m)) }
        }
        unsafe fn none(m: Self::Mask) -> bool {
            // SAFETY: the caller's contract.
            unsafe { _mm256_testz_si256(m, m) == 1 }
        }
    }
}

/// Converts `n` elements (a multiple of [`words::step_elements`]) by step `K`'s pair.
///
/// # Safety
/// As [`words::run`]: the CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe { words::run::<W256, K, STREAM>(s, d, n) }
}

/// The word-lane kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
pub(super) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    super::drive_loops::<K, ALWAYS_STREAM>(
        src,
        dst,
        words::step_elements::<W256>(<K::D as crate::lanes::Lane>::BITS),
        super::avx2_available(),
        [run::<K, false>, run::<K, true>],
    );
}
