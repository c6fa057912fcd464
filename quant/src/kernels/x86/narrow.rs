//! The rounding steps the one-pass quantizers share (`encode4`, `encode8`), on float32 bits in
//! AVX-512 lanes: to bfloat16 (torch's arithmetic on bfloat16 tensors), and to the code of a
//! narrow float format (float4_e2m1fn, float8_e4m3fn) — one algorithm, the format a value.

use core::arch::x86_64::*;

/// A narrow float format as its rounding needs it (formats without inf, whose NaN code, if any,
/// lies above their largest finite value: what a clamped magnitude never reaches).
pub(crate) struct Narrow {
    /// Float32 mantissa bits dropped (23 minus the format's mantissa bits).
    shift: u32,
    /// The format's largest finite value, as float32 bits.
    max: u32,
    /// Its smallest normal value, as float32 bits.
    min_normal: u32,
    /// The code of a normal value is its float32 bits shifted, less this (`(127 - bias) <<
    /// mantissa bits`).
    rebias: u32,
    /// Below the smallest normal, codes are multiples of `1 / subnormal_steps`.
    subnormal_steps: f32,
    /// The sign bit's place in a code.
    sign: u32,
}

/// float4_e2m1fn: 1 mantissa bit, bias 1, largest 6, subnormal 0.5.
pub(crate) const FLOAT4: Narrow = Narrow {
    shift: 22,
    max: 0x40C0_0000,
    min_normal: 0x3F80_0000,
    rebias: 126 << 1,
    subnormal_steps: 2.0,
    sign: 3,
};

/// float8_e4m3fn: 3 mantissa bits, bias 7, largest 448, subnormals in steps of 2^-9.
pub(crate) const FLOAT8_E4M3FN: Narrow = Narrow {
    shift: 20,
    max: 0x43E0_0000,
    min_normal: 0x3C80_0000,
    rebias: 120 << 3,
    subnormal_steps: 512.0,
    sign: 7,
};

/// Float32 bits rounded to bfloat16 (nearest-even) and read back as float32 bits (a NaN's bits
/// are unspecified: the callers report NaN lanes).
///
/// # Safety
/// The CPU runs AVX-512 F.
#[inline(always)]
pub(crate) unsafe fn round_bf16(y: __m512i) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(y), _mm512_set1_epi32(1));
        let biased = _mm512_add_epi32(y, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
        _mm512_and_si512(biased, _mm512_set1_epi32(0xFFFF_0000u32 as i32))
    }
}

/// The codes (one per 32-bit lane) of `y` (float32 bits, not NaN) in `format`: the magnitude
/// `a` (`y` without its sign) clamped to the largest value, rounded to nearest-even — from the
/// smallest normal up by one addition on the bits (the mantissa's dropped bits, less one, plus
/// the kept bits' lowest), below it as a multiple of the subnormal step by the hardware's
/// conversion — and the sign of `y` in the code's top bit.
///
/// # Safety
/// The CPU runs AVX-512 F.
#[inline(always)]
pub(crate) unsafe fn code(y: __m512i, a: __m512i, format: &Narrow) -> __m512i {
    // SAFETY: AVX-512 F by the caller's contract.
    unsafe {
        let shift = _mm_cvtsi32_si128(format.shift as i32);
        let a = _mm512_min_epu32(a, _mm512_set1_epi32(format.max as i32));
        let odd = _mm512_and_si512(_mm512_srl_epi32(a, shift), _mm512_set1_epi32(1));
        let half = _mm512_set1_epi32(((1u32 << (format.shift - 1)) - 1) as i32);
        let rounded = _mm512_add_epi32(_mm512_add_epi32(a, half), odd);
        let normal = _mm512_sub_epi32(
            _mm512_srl_epi32(rounded, shift),
            _mm512_set1_epi32(format.rebias as i32),
        );
        let steps = _mm512_mul_ps(
            _mm512_castsi512_ps(a),
            _mm512_set1_ps(format.subnormal_steps),
        );
        let small = _mm512_cvtps_epi32(steps);
        let below = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(format.min_normal as i32));
        let code = _mm512_mask_blend_epi32(below, normal, small);
        // code | (sign bit moved to the code's top bit)
        let sign = _mm512_srl_epi32(y, _mm_cvtsi32_si128((31 - format.sign) as i32));
        _mm512_ternarylogic_epi32::<0xF8>(code, sign, _mm512_set1_epi32(1 << format.sign))
    }
}
