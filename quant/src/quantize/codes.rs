//! The references' own float4 code functions, kept for the values the one-pass forms leave to
//! the general path (NaN, -0): compressed-tensors' and torchao's.

use super::*;

/// compressed-tensors' float4 of a clamped value (`cast_to_fp4`, then `pack_fp4_to_uint8`): the
/// magnitude rounded at its thresholds (ties to even), times `sign(x)`, the sign bit kept. torch's
/// `sign` of ±0 and of NaN is 0, so -0 becomes +0 and a NaN the positive NaN of `abs` (code 0):
/// in float32 and float16 arithmetic every time; on bfloat16 tensors torch's vectorised loops
/// round that NaN to 0xFFFF (code 8), its scalar ones to 0x7FC0 (code 0), and dtcast writes 0.
pub(super) fn compressed_tensors_fp4_code(v: f32) -> u8 {
    let a = v.abs();
    let magnitude = if a.is_nan() {
        a
    } else if a <= 0.25 {
        0.0
    } else if a < 0.75 {
        0.5
    } else if a <= 1.25 {
        1.0
    } else if a < 1.75 {
        1.5
    } else if a <= 2.5 {
        2.0
    } else if a < 3.5 {
        3.0
    } else if a <= 5.0 {
        4.0
    } else {
        6.0
    };
    // `x * sign(x)`: sign(±0) and sign(NaN) are +0.
    let sign = if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    };
    let q = mul(magnitude, sign);
    let twice = (cvtt(q * 2.0) as i8).unsigned_abs();
    let index = match twice {
        1..=4 => twice,
        6 => 5,
        8 => 6,
        t if t >= 12 => 7,
        _ => 0,
    };
    index | u8::from(q.is_sign_negative()) << 3
}

/// torchao's `_f32_to_floatx_unpacked` for e2m1: round to nearest even on the float32 bits,
/// saturating at 6; NaN is not handled (its bits go through the normal path, as there).
pub(super) fn torchao_fp4_code(v: f32) -> u8 {
    let sign = ((v.to_bits() & 0x8000_0000) >> 28) as u8;
    let x = f32::from_bits(v.to_bits() & 0x7FFF_FFFF);
    let code = if x >= 6.0 {
        7
    } else if x < 1.0 {
        // Below the smallest normal (1.0): adding 2^21 leaves the code in the low bits, the float
        // addition rounding it to nearest even.
        let denorm_exp: u32 = (127 - 1) + (23 - 1) + 1;
        let magic = f32::from_bits(denorm_exp << 23);
        ((x + magic).to_bits().wrapping_sub(denorm_exp << 23)) as u8
    } else {
        let bits = x.to_bits() as i32;
        let odd = (bits >> 22) & 1;
        let add = ((1 - 127) << 23) + ((1 << 21) - 1);
        (bits.wrapping_add(add).wrapping_add(odd) >> 22) as u8
    };
    code | sign
}
