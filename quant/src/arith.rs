//! The float arithmetic the references do, with their rounding points and NaN bits.

use dtcast_cast::{cast, cast_to_vec, CastMode};
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

/// torch's float32 → bfloat16 as dtcast's Torch mode casts a tensor: nearest-even, every NaN
/// `0xFFFF` (torch's vectorised conversion).
#[inline(always)]
pub(crate) fn bf16_bits(x: f32) -> u16 {
    if x.is_nan() {
        0xFFFF
    } else {
        let b = x.to_bits();
        ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// torch's float32 → float16 as dtcast's Torch mode casts a tensor (x86's `vcvtps2ph`):
/// nearest-even, overflow to ±inf, float16 subnormals rounded at 2^-24; a NaN quieted with its
/// top payload bits kept.
#[inline(always)]
pub(crate) fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = (b >> 16) as u16 & 0x8000;
    let magnitude = b & 0x7FFF_FFFF;
    let bits = if magnitude > 0x7F80_0000 {
        0x7E00 | (magnitude >> 13) & 0x3FF
    } else if magnitude >= 0x477F_F000 {
        // 65520 (half way from float16's largest, 65504, to 2^16) and above: inf.
        0x7C00
    } else if magnitude >= 0x3880_0000 {
        // Normal in float16 (2^-14 and above): exponent rebiased from 127 to 15, the mantissa
        // rounded from 23 bits to 10 (a carry moves into the exponent, as it should).
        let rebiased = magnitude - (112 << 23);
        (rebiased + 0xFFF + ((rebiased >> 13) & 1)) >> 13
    } else {
        // Below: a multiple of 2^-24. The value is `m * 2^(e - 150)`, so `m >> (126 - e)` in
        // units of 2^-24, rounded to nearest-even (float32 subnormals and anything under 2^-25
        // give zero).
        let e = magnitude >> 23;
        let shift = 126 - e.min(126);
        if e == 0 || shift > 24 {
            0
        } else {
            let m = (magnitude & 0x7F_FFFF) | 0x80_0000;
            let half = 1 << (shift - 1);
            (m + half - 1 + ((m >> shift) & 1)) >> shift
        }
    };
    sign | bits as u16
}

/// `y` rounded as torch's arithmetic on `dtype` tensors rounds a result: to bfloat16 (a NaN the
/// default NaN, [`round_bf16`]), to float16 ([`round_f16`]), or not at all (float32).
#[inline(always)]
pub(crate) fn round_in(y: f32, dtype: DType) -> f32 {
    if dtype == DType::BFloat16 {
        round_bf16(y)
    } else if dtype == DType::Float16 {
        round_f16(y)
    } else {
        y
    }
}

/// `y` rounded to float16 and read back: torch's float16 arithmetic (computed in float32, then
/// rounded to nearest-even; 65520 and above overflow to inf; a NaN keeps its sign, is quieted and
/// keeps its top 10 payload bits): `f16_value(f16_bits(y))`, which a test holds it to on every
/// float32 bit pattern, written without branches so that the loops calling it vectorise.
#[inline(always)]
pub(crate) fn round_f16(y: f32) -> f32 {
    let b = y.to_bits();
    let magnitude = b & 0x7FFF_FFFF;
    // Normal in float16: the mantissa rounded from 23 bits to 10 on the bits (a carry moves into
    // the exponent, as it should). Below 2^-14, a multiple of 2^-24: adding 0.5 (whose float32
    // step is 2^-24) rounds to one, nearest-even.
    let normal = (magnitude + 0xFFF + ((magnitude >> 13) & 1)) & 0xFFFF_E000;
    let subnormal = ((f32::from_bits(magnitude) + 0.5) - 0.5).to_bits();
    let mut r = if magnitude < 0x3880_0000 {
        subnormal
    } else {
        normal
    };
    r = if magnitude >= 0x477F_F000 {
        0x7F80_0000
    } else {
        r
    };
    r = if magnitude > 0x7F80_0000 {
        (magnitude | 0x40_0000) & 0xFFFF_E000
    } else {
        r
    };
    f32::from_bits(r | (b & 0x8000_0000))
}

/// The float32 value of float16 bits `h` (exact; a NaN keeps its sign and payload), without
/// branches: the bits moved to float32's places and scaled by 2^112 (exact, subnormals
/// included), inf and NaN moved as they are.
#[inline(always)]
pub(crate) fn f16_value(h: u16) -> f32 {
    let magnitude = u32::from(h & 0x7FFF) << 13;
    let finite = (f32::from_bits(magnitude) * f32::from_bits(0x7780_0000)).to_bits();
    let r = if magnitude >= 0x7C00 << 13 {
        0x7F80_0000 | magnitude
    } else {
        finite
    };
    f32::from_bits(r | u32::from(h & 0x8000) << 16)
}

/// The float32 value of a 16-bit float's bits `h`: bfloat16 (the top half of its float32) or
/// float16 ([`f16_value`]); exact, NaN bits kept. Any other dtype reads `h` as a bfloat16 (the
/// callers hand only these two).
#[inline(always)]
pub(crate) fn half_value(h: u16, dtype: DType) -> f32 {
    if dtype == DType::Float16 {
        f16_value(h)
    } else {
        f32::from_bits(u32::from(h) << 16)
    }
}

/// The magnitude bits of a 16-bit float dtype's infinity (its exponent field all ones; NaN
/// above), from the dtype table: 0x7F80 for bfloat16, 0x7C00 for float16.
pub(crate) fn half_inf_bits(dtype: DType) -> u16 {
    let format = dtype.float_format().filter(|f| f.total_bits() == 16);
    let (e, m) = format.map_or((8, 7), |f| (f.exponent_bits, f.mantissa_bits));
    (((1u32 << e) - 1) << m) as u16
}

/// `2^e` in float32 (subnormal below 2^-126, inf above 2^127), as `torch.pow(2.0, e)`.
pub(crate) fn pow2(e: i32) -> f32 {
    (f64::from_bits(((i64::from(e) + 1023) as u64) << 52)) as f32
}

fn quiet(x: f32) -> f32 {
    f32::from_bits(x.to_bits() | 0x0040_0000)
}

/// x86's default NaN (Intel's "QNaN floating-point indefinite": sign set), what SSE and AVX
/// arithmetic writes for an invalid operation on two numbers (0 × inf, 0 / 0, inf / inf). The
/// references ran on x86, and its sign reaches their bytes (a negative NaN is float8_e4m3fn's
/// code 0xFF, not 0x7F). Arm writes `0x7FC0_0000` and CUDA `0x7FFF_FFFF`, so dtcast writes x86's
/// wherever it runs.
pub(crate) const X86_INDEFINITE: f32 = f32::from_bits(0xFFC0_0000);

/// `y`, the result of an operation on two numbers (neither a NaN), with x86's NaN where it is
/// one: on x86 the hardware wrote it (operands known at compile time aside: LLVM folds those into
/// the positive NaN, and dtcast's never are); elsewhere a compare and a select, which LLVM
/// vectorises in the loops that call this.
#[inline(always)]
pub(crate) fn as_on_x86(y: f32) -> f32 {
    if cfg!(any(target_arch = "x86", target_arch = "x86_64")) || !y.is_nan() {
        y
    } else {
        X86_INDEFINITE
    }
}

/// `x * f` (or `x / f`: `y`) for a factor `f` that is not a NaN, as x86 computes it: a NaN `x`
/// comes back quieted (by every CPU), an invalid operation as [`X86_INDEFINITE`].
#[inline(always)]
pub(crate) fn scaled_as_on_x86(y: f32, x: f32) -> f32 {
    if x.is_nan() {
        y
    } else {
        as_on_x86(y)
    }
}

/// torch's `x * scale` on x86, `scale` broadcast over `x` (a group's scale over its elements):
/// a NaN operand is returned quieted, the broadcast one if both are NaN (what ATen's loops give).
pub(crate) fn mul(x: f32, scale: f32) -> f32 {
    if scale.is_nan() {
        quiet(scale)
    } else if x.is_nan() {
        quiet(x)
    } else {
        as_on_x86(x * scale)
    }
}

/// x86's `a / b`: a NaN operand is returned quieted, the first one if both are.
pub(crate) fn div(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        quiet(a)
    } else if b.is_nan() {
        quiet(b)
    } else {
        as_on_x86(a / b)
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

/// float32 `values` rounded once to `through` (the dtype a reference computes in, where it is
/// not `out`) and cast to `out`, into `dst`: torch's product in that dtype, then dtcast's cast
/// (`rounded`: scratch).
pub(crate) fn round_then_cast(
    values: &[u8],
    through: Option<DType>,
    out: DType,
    dst: &mut [u8],
    rounded: &mut Vec<u8>,
) -> Result<(), QuantError> {
    match through {
        None => cast(values, DType::Float32, dst, out, CastMode::Torch),
        Some(mid) => {
            rounded.resize(values.len() / 4 * mid.byte_size().unwrap_or(4), 0);
            cast(values, DType::Float32, rounded, mid, CastMode::Torch)
                .and_then(|_| cast(rounded, mid, dst, out, CastMode::Torch))
        }
    }
    .map(|_| ())
    .map_err(internal)
}

/// A cast between buffers whose lengths were checked cannot fail; if it does, it says why.
pub(crate) fn internal(e: dtcast_cast::CastError) -> QuantError {
    QuantError::Shape {
        reason: format!("internal error in a cast: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `round_f16` is `f16_value(f16_bits(y))`, and `f16_value` the exact value of every float16
    /// (read against the float64 value of its fields): on every float32 bit pattern, all 2^32.
    #[test]
    fn float16_rounding_and_reading_hold_on_every_pattern() {
        use rayon::prelude::*;
        for h in 0..=u16::MAX {
            let (exponent, mantissa) = (i32::from((h >> 10) & 0x1F), f64::from(h & 0x3FF));
            let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
            let want = match exponent {
                0 => sign * mantissa * 2f64.powi(-24),
                31 => continue,
                e => sign * (1.0 + mantissa / 1024.0) * 2f64.powi(e - 15),
            };
            assert_eq!(f64::from(f16_value(h)), want, "{h:#06x}");
        }
        for h in (0x7C00..=0x7FFF).chain(0xFC00..=0xFFFF) {
            let want = u32::from(h & 0x8000) << 16 | 0x7F80_0000 | u32::from(h & 0x3FF) << 13;
            assert_eq!(f16_value(h).to_bits(), want, "{h:#06x}");
        }
        let differing = (0..=u32::MAX)
            .into_par_iter()
            .filter(|&b| {
                let y = f32::from_bits(b);
                round_f16(y).to_bits() != f16_value(f16_bits(y)).to_bits()
            })
            .count();
        assert_eq!(differing, 0);
    }
    use std::hint::black_box;

    /// The NaN bits of an invalid operation are x86's on every CPU (Intel's manual: the QNaN
    /// floating-point indefinite is sign 1, exponent all ones, mantissa 100...0), and a NaN
    /// operand comes back quieted with its own sign and payload. (`black_box`: LLVM folds a
    /// constant invalid operation into the positive NaN whatever the target.)
    #[test]
    fn invalid_operations_give_x86s_nan_and_nan_operands_come_back_quieted() {
        let (inf, zero) = (black_box(f32::INFINITY), black_box(0.0f32));
        for y in [
            mul(zero, inf),
            mul(inf, zero),
            mul(-zero, inf),
            div(zero, zero),
            div(inf, -inf),
            div(-zero, zero),
        ] {
            assert_eq!(y.to_bits(), 0xFFC0_0000);
        }
        // Signalling NaNs with payloads: quieted, sign and payload kept; the broadcast scale
        // wins a product, the first operand a quotient.
        let (a, b) = (
            black_box(f32::from_bits(0x7F80_0001)),
            black_box(f32::from_bits(0xFF80_0002)),
        );
        assert_eq!(mul(a, 2.0).to_bits(), 0x7FC0_0001);
        assert_eq!(mul(a, b).to_bits(), 0xFFC0_0002);
        assert_eq!(div(a, b).to_bits(), 0x7FC0_0001);
        assert_eq!(div(2.0, b).to_bits(), 0xFFC0_0002);
        // The loop form: a run scaled by inf, then by 0.
        let run = black_box([
            0.0f32,
            -0.0,
            1.5,
            f32::INFINITY,
            f32::from_bits(0xFFC0_1234),
        ]);
        for (f, want) in [
            (
                inf,
                [
                    0xFFC0_0000u32,
                    0xFFC0_0000,
                    0x7F80_0000,
                    0x7F80_0000,
                    0xFFC0_1234,
                ],
            ),
            (zero, [0, 0x8000_0000, 0, 0xFFC0_0000, 0xFFC0_1234]),
        ] {
            let got = run.map(|x| scaled_as_on_x86(x * f, x).to_bits());
            assert_eq!(got, want, "times {f}");
        }
    }
}
