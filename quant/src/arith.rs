//! The float arithmetic the references do, with their rounding points and NaN bits.

use dtcast_cast::{cast_to_vec, CastMode};
use dtcast_dtype::DType;

use crate::QuantError;

/// torch's `.to()` (dtcast's Torch mode); the lengths are checked by the callers.
pub(crate) fn torch_cast(src: &[u8], from: DType, to: DType) -> Vec<u8> {
    cast_to_vec(src, from, to, CastMode::Torch).unwrap_or_default()
}

/// `values` rounded to `dtype` as torch's `.to(dtype)` does, read back as float32 (NaN bits
/// included: a bfloat16 NaN from torch's vectorised rounding is `0xFFFF`).
pub(crate) fn in_dtype(values: &[f32], dtype: DType) -> Vec<f32> {
    if dtype == DType::Float32 {
        return values.to_vec();
    }
    let rounded = torch_cast(&bytes(values), DType::Float32, dtype);
    f32s(&torch_cast(&rounded, dtype, DType::Float32))
}

pub(crate) fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub(crate) fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The positive default NaN: what torch's bfloat16 arithmetic leaves for any NaN.
pub(crate) const DEFAULT_NAN: f32 = f32::from_bits(0x7FC0_0000);

/// `y` rounded to bfloat16 (to nearest even; inf stays, the largest finite values become inf)
/// and read back, a NaN as the default NaN: torch's bfloat16 arithmetic.
#[inline(always)]
pub(crate) fn round_bf16(y: f32) -> f32 {
    let b = y.to_bits();
    let rounded = f32::from_bits(b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000);
    if y.is_nan() {
        DEFAULT_NAN
    } else {
        rounded
    }
}

/// `2^e` in float32 (subnormal below 2^-126, inf above 2^127), as `torch.pow(2.0, e)`.
pub(crate) fn pow2(e: i32) -> f32 {
    (f64::from_bits(((i64::from(e) + 1023) as u64) << 52)) as f32
}

fn quiet(x: f32) -> f32 {
    f32::from_bits(x.to_bits() | 0x0040_0000)
}

/// torch's `x * scale` on x86, `scale` broadcast over `x` (a group's scale over its elements):
/// a NaN operand is returned quieted, the broadcast one if both are NaN (what ATen's loops give).
pub(crate) fn mul(x: f32, scale: f32) -> f32 {
    if scale.is_nan() {
        quiet(scale)
    } else if x.is_nan() {
        quiet(x)
    } else {
        x * scale
    }
}

/// x86's `a / b`: a NaN operand is returned quieted, the first one if both are.
pub(crate) fn div(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        quiet(a)
    } else if b.is_nan() {
        quiet(b)
    } else {
        a / b
    }
}

/// `torch.clamp(x, lo, hi)`: NaN stays NaN.
pub(crate) fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    if x.is_nan() {
        x
    } else {
        x.max(lo).min(hi)
    }
}

/// A float to a small integer type as x86 converts (NaN and out of range: `i32::MIN`).
pub(crate) fn cvtt(x: f32) -> i32 {
    if x > -2_147_483_649.0 && x < 2_147_483_648.0 {
        x as i32
    } else {
        i32::MIN
    }
}

/// A cast between buffers whose lengths were checked cannot fail; if it does, it says why.
pub(crate) fn internal(e: dtcast_cast::CastError) -> QuantError {
    QuantError::Shape {
        reason: format!("internal error in a cast: {e}"),
    }
}
