//! float8_e4m3fn elements (FP8 per tensor, per channel, in 128×128 blocks; MXFP8) quantized in
//! one pass on AVX-512: a run of elements that share a factor is read (bfloat16 or float32),
//! divided or multiplied by it, rounded to bfloat16 where the reference computes in bfloat16,
//! clamped to 448 and rounded to float8 (nearest-even: three mantissa bits kept from 2^-6, steps
//! of 2^-9 below), 16 elements per step — instead of a float32 buffer written and read back by
//! the SIMD cast. inf and NaN are reported for the general path (`quantize::encode_general`,
//! the definition the tests there hold this to).

use crate::encode4::Rules;

/// Whether the one-pass form serves: float8_e4m3fn elements, clamped, on a CPU with AVX-512.
pub(crate) fn supports(element: dtcast_dtype::DType, clamp: bool) -> bool {
    element == dtcast_dtype::DType::Float8E4M3Fn && clamp && crate::lookup4::avx512()
}

/// A run's kernel, picked once for its input dtype and rules ([`kernel`]).
pub(crate) type Kernel = unsafe fn(&[u8], f32, &mut [u8]) -> bool;

/// The kernel for bfloat16 (`bf16`) or float32 input under `rules` (its `unsigned_zero` is
/// compressed-tensors' float4 rule, not float8's: unused). Call it only where [`supports`] said
/// so, with a finite nonzero factor: `kernel(src, f, out)` quantizes `src` (one element per byte
/// of `out`) and returns false, with `out` unspecified, where an element is inf or NaN.
pub(crate) fn kernel(bf16: bool, rules: Rules) -> Kernel {
    #[cfg(target_arch = "x86_64")]
    {
        match (bf16, rules.divide, rules.round_bf16) {
            (true, true, true) => x86::run::<true, true, true>,
            (true, true, false) => x86::run::<true, true, false>,
            (true, false, true) => x86::run::<true, false, true>,
            (true, false, false) => x86::run::<true, false, false>,
            (false, true, true) => x86::run::<false, true, true>,
            (false, true, false) => x86::run::<false, true, false>,
            (false, false, true) => x86::run::<false, false, true>,
            (false, false, false) => x86::run::<false, false, false>,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (bf16, rules);
        unsupported
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn unsupported(_: &[u8], _: f32, _: &mut [u8]) -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::*;

    use crate::narrow;

    /// The float8_e4m3fn codes (one per 32-bit lane) of 16 elements (`x`: float32 bits) scaled
    /// by `f`, rounded to bfloat16 first when `ROUND`, clamped to 448; lanes whose result is inf
    /// or NaN are added to `bad`.
    #[inline(always)]
    unsafe fn codes<const DIVIDE: bool, const ROUND: bool>(
        x: __m512i,
        f: __m512,
        bad: &mut __mmask16,
    ) -> __m512i {
        // SAFETY: AVX-512 F by the caller's contract.
        unsafe {
            let xf = _mm512_castsi512_ps(x);
            let mut y = _mm512_castps_si512(if DIVIDE {
                _mm512_div_ps(xf, f)
            } else {
                _mm512_mul_ps(xf, f)
            });
            if ROUND {
                // NaN is reported below, whatever its bits become.
                y = narrow::round_bf16(y);
            }
            let a = _mm512_and_si512(y, _mm512_set1_epi32(0x7FFF_FFFF));
            *bad |= _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x7F80_0000));
            // Clamped to 448, as the references clamp before encoding.
            narrow::code(y, a, &narrow::FLOAT8_E4M3FN)
        }
    }

    /// `count` (at most 16) elements at `s` as float32 bits, the rest of the lanes 0.
    #[inline(always)]
    unsafe fn load<const BF16: bool>(s: *const u8, count: usize) -> __m512i {
        // SAFETY: the caller gives `count` elements at `s`; AVX-512 F, BW and VL.
        unsafe {
            let mask = (1u32 << count).wrapping_sub(1) as u16;
            if BF16 {
                let half = if count == 16 {
                    _mm256_loadu_si256(s.cast())
                } else {
                    _mm256_maskz_loadu_epi16(mask, s.cast())
                };
                _mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(half))
            } else if count == 16 {
                _mm512_loadu_si512(s.cast())
            } else {
                _mm512_maskz_loadu_epi32(mask, s.cast())
            }
        }
    }

    /// [`super::kernel`]'s run on AVX-512.
    ///
    /// # Safety
    /// The CPU runs AVX-512 F, BW, VL and DQ; `src` holds `out.len()` elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn run<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
        src: &[u8],
        f: f32,
        out: &mut [u8],
    ) -> bool {
        let size = if BF16 { 2 } else { 4 };
        debug_assert_eq!(src.len(), out.len() * size);
        let f = _mm512_set1_ps(f);
        let mut bad: __mmask16 = 0;
        let mut i = 0;
        while i < out.len() {
            let count = (out.len() - i).min(16);
            // SAFETY: elements i..i + count of `src` and bytes i..i + count of `out` are inside
            // both; AVX-512 by this function's contract.
            unsafe {
                let x = load::<BF16>(src.as_ptr().add(i * size), count);
                let bytes = _mm512_cvtepi32_epi8(codes::<DIVIDE, ROUND>(x, f, &mut bad));
                let at = out.as_mut_ptr().add(i);
                if count == 16 {
                    _mm_storeu_si128(at.cast(), bytes);
                } else {
                    _mm_mask_storeu_epi8(at.cast(), (1u32 << count).wrapping_sub(1) as u16, bytes);
                }
            }
            i += count;
        }
        bad == 0
    }
}
