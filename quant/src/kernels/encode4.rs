//! Float4 groups (MXFP4: 32, NVFP4: 16) quantized in one pass on AVX-512: each element is read
//! (bfloat16 or float32), scaled by its group's factor, rounded to bfloat16 where the reference
//! computes in bfloat16, rounded to float4 (nearest-even, saturating at 6) and packed, all in
//! registers — instead of a float32 buffer written, read back by a SIMD cast and patched.
//!
//! The float32 form rounds through `narrow::code`: at 1 and above, the exponent and first
//! mantissa bit rounded to nearest-even by one addition on the bits (torchao's
//! `_f32_to_floatx_unpacked`), below 1 twice the value converted by the hardware (nearest-even).
//! The MX form ([`encode_pow2`]) does the same on 16-bit lanes, with two comparisons below 1
//! (`> 0.25` gives 0.5, `>= 0.75` gives 1.0). NaN and inf inputs are not handled: the pass
//! reports them and the caller runs the general path, whose rules for them are the references'
//! (`quantize::encode_general`, the definition this is held to by the tests there).

use dtcast_dtype::DType;

/// Whether the one-pass form serves: float4 elements in groups of 16 or 32, from bfloat16 or
/// float32, on a CPU with AVX-512.
pub(crate) fn supports(element: DType, group: usize) -> bool {
    element == DType::Float4E2M1Fn && matches!(group, 16 | 32) && crate::lookup4::avx512()
}

/// How a group's values become the values that are rounded to float4.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// Divide by the factor (else multiply).
    pub divide: bool,
    /// The dtype the scaled value is rounded to before float4 (or float8): bfloat16 or float16
    /// where the reference computes in the weight's dtype (compressed-tensors), float32 (no
    /// rounding) elsewhere. This module's kernels take float32 and bfloat16; `encode8` and
    /// `thresholds` take all three.
    pub arithmetic: DType,
    /// A scaled value of exactly -0 is code 0 (compressed-tensors' `x * sign(x)`), not 8.
    pub unsigned_zero: bool,
}

impl Rules {
    /// Whether the scaled value is rounded to bfloat16: what this module's kernels and
    /// `encode8`'s for bfloat16 and float32 input ask (float16 arithmetic comes with float16
    /// input only, which neither hands them).
    pub(crate) fn rounds_bf16(&self) -> bool {
        debug_assert_ne!(self.arithmetic, DType::Float16);
        self.arithmetic == DType::BFloat16
    }
}

/// The exponent `k` of a factor that is a power of two (`2^k`, subnormals included), for
/// [`encode_pow2`]: `None` for any other value.
pub(crate) fn power_of_two_exponent(f: f32) -> Option<i32> {
    let b = f.to_bits();
    let exponent = (b >> 23) as i32;
    if b & 0x807F_FFFF == 0 && (1..=254).contains(&exponent) {
        Some(exponent - 127)
    } else if b != 0 && b < 0x0080_0000 && b.is_power_of_two() {
        Some(b.trailing_zeros() as i32 - 149)
    } else {
        None
    }
}

/// [`encode`] for bfloat16 groups whose factors multiply by powers of two (`shifts[g]`: the
/// exponent, -127 ..= 127; MX scales): the product is exact wherever input and result are normal,
/// so the 16-bit elements are scaled by adding to their exponent field, 32 at a time, and the
/// bfloat16 rounding (compressed-tensors') has nothing to round. An element that is subnormal,
/// inf or NaN, or whose product is not normal, is reported (false) for the general path.
pub(crate) fn encode_pow2(
    src: &[u8],
    group: usize,
    shifts: &[i32],
    unsigned_zero: bool,
    out: &mut [u8],
) -> bool {
    debug_assert!(supports(DType::Float4E2M1Fn, group));
    debug_assert_eq!(out.len() * 2, shifts.len() * group);
    debug_assert_eq!(src.len(), out.len() * 4);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `supports` checked that this CPU runs AVX-512 F, BW, VL and DQ.
    unsafe {
        x86::encode_pow2(src, group, shifts, unsigned_zero, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (unsigned_zero, out);
        false
    }
}

/// Quantizes `src` (whole groups of `group` elements, bfloat16 when `bf16` else float32,
/// little-endian; one factor per group, finite and nonzero) into `out` (packed, the first
/// element of each byte in its low nibble). Returns false, with `out` unspecified, where an
/// element is inf or NaN (the general path's business).
pub(crate) fn encode(
    src: &[u8],
    bf16: bool,
    group: usize,
    factors: &[f32],
    rules: Rules,
    out: &mut [u8],
) -> bool {
    debug_assert!(supports(DType::Float4E2M1Fn, group));
    debug_assert_eq!(out.len() * 2, factors.len() * group);
    debug_assert_eq!(src.len(), out.len() * 2 * if bf16 { 2 } else { 4 });
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `supports` checked that this CPU runs AVX-512 F, BW, VL and DQ.
    unsafe {
        match (bf16, rules.divide, rules.rounds_bf16()) {
            (true, true, true) => x86::encode::<true, true, true>(src, group, factors, rules, out),
            (true, true, false) => {
                x86::encode::<true, true, false>(src, group, factors, rules, out)
            }
            (true, false, true) => {
                x86::encode::<true, false, true>(src, group, factors, rules, out)
            }
            (true, false, false) => {
                x86::encode::<true, false, false>(src, group, factors, rules, out)
            }
            (false, true, true) => {
                x86::encode::<false, true, true>(src, group, factors, rules, out)
            }
            (false, true, false) => {
                x86::encode::<false, true, false>(src, group, factors, rules, out)
            }
            (false, false, true) => {
                x86::encode::<false, false, true>(src, group, factors, rules, out)
            }
            (false, false, false) => {
                x86::encode::<false, false, false>(src, group, factors, rules, out)
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rules, out);
        false
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86::encode4 as x86;
