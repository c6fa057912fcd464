//! AVX2's instantiation of the 16-bit-lane narrowing (`words.rs`): [`Words`] over `__m256i` (16
//! lanes), and the loop that converts 32 elements a step. AVX2 has no variable 16-bit shifts: the
//! rounding below the smallest normal multiplies by a power of two instead (built by 32-bit
//! variable shifts), whose high half is the quotient and low half the bits shifted out.

use core::arch::x86_64::*;

use super::super::steps::Step;
use super::super::words::{self, inline_all, Words};
use super::avx2::{put_u4, put_u6};

/// 16 16-bit lanes.
#[derive(Clone, Copy)]
struct W256(__m256i);

// Every method: the caller guarantees AVX2 (checked once by `kernel`); each body is one or a few
// intrinsics.
impl Words for W256 {
    const LANES: usize = 16;
    const SKIPS_SUBNORMAL_ROUNDING: bool = false;
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
        unsafe fn sub_or_zero(self, o: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe { W256(_mm256_subs_epu16(self.0, o.0)) }
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
        unsafe fn shr_round(self, s1: Self) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                // m = 2^(16 - s) = 2^(15 - s1), each 16-bit half of a 32-bit lane shifted on its
                // own; x * m is x << (16 - s): its high half x >> s, its low half the bits
                // shifted out, left-aligned.
                let k = _mm256_sub_epi16(_mm256_set1_epi16(15), s1.0);
                let low = _mm256_sllv_epi32(
                    _mm256_set1_epi32(1),
                    _mm256_and_si256(k, _mm256_set1_epi32(0xFFFF)),
                );
                let high = _mm256_sllv_epi32(_mm256_set1_epi32(0x1_0000), _mm256_srli_epi32::<16>(k));
                let m = _mm256_blend_epi16::<0b1010_1010>(low, high);
                let q = _mm256_mulhi_epu16(self.0, m);
                let fraction = _mm256_mullo_epi16(self.0, m);
                // Up where the fraction exceeds a half less the quotient's lowest bit (ties to
                // even), as unsigned numbers: with the top bits flipped, a signed compare of
                // fraction - 2^15 with -odd.
                let odd = _mm256_and_si256(q, _mm256_set1_epi16(1));
                let up = _mm256_cmpgt_epi16(
                    _mm256_xor_si256(fraction, _mm256_set1_epi16(i16::MIN)),
                    _mm256_sub_epi16(_mm256_setzero_si256(), odd),
                );
                W256(_mm256_sub_epi16(q, up))
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

/// Converts `n` elements (a multiple of 32) by step `K`'s pair.
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
        2 * W256::LANES,
        super::avx2_available(),
        [run::<K, false>, run::<K, true>],
    );
}
