//! ml_dtypes' value rules, for the pairs that torch 2.15 cannot cast (any pair with a dtype that
//! torch lacks or only stores: float8_e4m3, float8_e3m4, float8_e4m3b11fnuz, float8_e5m3fnu,
//! float6, float4, int4/2/1, uint4/2/1). Reproduced from ml_dtypes 0.7's `astype` (vectors in
//! `tests/fixtures/lowp/`):
//!
//! - A value reaches a narrow float in one rounding to nearest-even from its float64 or float32
//!   value (0.6 rounded float64 twice, through float32); integers go through f32 first.
//! - In the unsigned float8_e5m3fnu every negative value but -0 is past the range (its NaN; even
//!   one that would round to zero); into float8_e8m0fnu, zero and negative values are its NaN.
//! - Past the largest finite value, and for ±inf: ±inf where the format has it, else its NaN, else
//!   (float6, float4: neither) ±max.
//! - NaN: the format's NaN with the value's sign (fnuz: `0x80`); formats without NaN write the zero
//!   of the opposite sign (NaN → -0.0), as ml_dtypes does.
//! - A narrow float read as a value is exact; its NaN is the quiet NaN of its sign (an fnuz NaN,
//!   `0x80`, is negative).
//! - float → integer truncates. Into int8..int64/uint8..uint64: NaN → 0, ±inf → the type's
//!   max/min, otherwise the low bits of the 64-bit integer. Into int4/2/1, uint4/2/1: the low bits
//!   of the truncated value, and 0 for NaN, ±inf and |x| ≥ 2^31 (ml_dtypes through float32; its
//!   float8 → int4 path differs for ±inf and NaN, which C leaves undefined — dtcast uses this one
//!   rule).
//! - integer → integer keeps the low bits (numpy casts every pair under ml_dtypes 0.7, narrowing
//!   int4 → int2 included).

use dtcast_dtype::DType;

use crate::formats::{Ending, Narrow, Out};
use crate::rules::{self, Val};

/// ml_dtypes' conversion of `v` to the format `n`: one rounding from a float64 or float32 value,
/// integers through f32 first.
#[inline(always)]
pub(crate) fn encode(n: &Narrow, v: Val) -> u32 {
    let x = match v.real() {
        Val::Double(x) => x,
        other => f64::from(rules::to_f32(other, false)),
    };
    n.encode_ending(x, ending(n, false))
}

/// Saturate mode: one rounding from the exact value; finite overflow gives ±max, ±inf gives ±inf
/// where the format has it (else ±max), and NaN gives the format's NaN — or +0 where it has none.
#[inline(always)]
pub(crate) fn saturate(n: &Narrow, v: Val) -> u32 {
    n.encode_ending(rules::to_f64_for_rounding(v), ending(n, true))
}

/// What ml_dtypes' rounding (`saturate`: dtcast's Saturate) writes into `n` past its finite range
/// and for NaN. ml_dtypes: ±inf where the format has it, else its NaN, else (float6, float4:
/// neither) ±max, for overflow and inf alike; NaN → the format's NaN (the zero of the opposite
/// sign where it has none). Saturate: overflow → ±max, inf → ±inf where the format has it, NaN →
/// +0 where the format has no NaN.
pub(crate) const fn ending(n: &Narrow, saturate: bool) -> Ending {
    let has_inf = n.inf_mag.is_some();
    if saturate {
        Ending {
            overflow: Out::Max,
            inf: if has_inf { Out::Inf } else { Out::Max },
            nan_is_nan: n.has_nan,
        }
    } else {
        let beyond = if has_inf {
            Out::Inf
        } else if n.has_nan {
            Out::Nan
        } else {
            Out::Max
        };
        Ending {
            overflow: beyond,
            inf: beyond,
            nan_is_nan: true,
        }
    }
}

/// The format and the endings that a float source torch casts (float32, bfloat16, float16, ...)
/// gets into the narrow float `to` in Torch rounding (`saturate`: Saturate): torch's rules for its
/// float8 formats, ml_dtypes' for the others — what the scalar lanes do (`lanes.rs`,
/// `lowp_lanes.rs`), for the SIMD kernels that restate it. `None` where `to` is not a signed
/// narrow float (float8_e8m0fnu, or wider than a byte).
// Only the x86 kernels restate the rule (the portable ones look narrow floats up).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    allow(dead_code)
)]
pub(crate) const fn destination(to: DType, saturate: bool) -> Option<(Narrow, Ending)> {
    match (rules::Float8::of(to), to.float_format()) {
        (Some(f), _) => Some((f.format, f.ending(saturate))),
        (None, Some(f)) if f.signed && to.bits() <= 8 => {
            let n = Narrow::of(to);
            Some((n, ending(&n, saturate)))
        }
        (None, _) => None,
    }
}

/// The value of `code`, exactly; a NaN is the quiet f32 NaN with the code's sign.
#[inline(always)]
pub(crate) fn decode(n: &Narrow, code: u32) -> f32 {
    if n.is_nan(code) {
        let negative = code & n.sign_bit() != 0;
        f32::from_bits(if negative { 0xFFC0_0000 } else { 0x7FC0_0000 })
    } else {
        n.decode(code) as f32
    }
}

/// float → int8..int64 / uint8..uint64: NaN → 0, ±inf → the type's bounds, else the low bits of
/// the truncated 64-bit value. `MIN`/`MAX` are the destination's bounds as i128.
#[inline(always)]
pub(crate) fn float_to_int(x: f64, min: i128, max: i128) -> i128 {
    if x.is_nan() {
        0
    } else if x == f64::INFINITY {
        max
    } else if x == f64::NEG_INFINITY {
        min
    } else {
        i128::from(rules::cvtt64(x))
    }
}

/// float → int4/2/1, uint4/2/1 (before keeping the low bits): the truncated value, or 0 for NaN,
/// ±inf and |x| ≥ 2^31.
#[inline(always)]
pub(crate) fn float_to_narrow_int(x: f64) -> i64 {
    if x > -2_147_483_648.0 && x < 2_147_483_648.0 {
        x as i64
    } else {
        0
    }
}
