//! The value rules: what each destination makes of a source value, in Torch and Saturate mode.
//!
//! A source element is first read as a [`Val`] — the value torch's `static_cast` sees (float16,
//! bfloat16 and float8 are widened to f32 first, exactly as c10's types convert). Each destination
//! then applies its rule. Everything here is `#[inline(always)]` so that the generic kernels,
//! monomorphised per (source, destination) pair, fold the `Val` match away.
//!
//! PyTorch's NaN bits depend on the path a pair takes through ATen's copy kernel, not on one rule;
//! the quirks we reproduce (recorded from torch 2.15 on x86-64) are named where they apply.

use dtcast_dtype::DType;

use crate::formats::{self, Ending, Out};

/// A source value as torch's conversion sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Val {
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// float16, bfloat16, float8 and float32 sources: exactly an f32.
    Float(f32),
    Double(f64),
    /// complex32, bcomplex32 and complex64 sources.
    CFloat(f32, f32),
    CDouble(f64, f64),
}

impl Val {
    /// The real part (complex → real takes `.real()`).
    #[inline(always)]
    pub(crate) fn real(self) -> Val {
        match self {
            Val::CFloat(re, _) => Val::Float(re),
            Val::CDouble(re, _) => Val::Double(re),
            v => v,
        }
    }

    /// The imaginary part as a real value (+0 for real values).
    #[inline(always)]
    pub(crate) fn imag(self) -> Val {
        match self {
            Val::CFloat(_, im) => Val::Float(im),
            Val::CDouble(_, im) => Val::Double(im),
            Val::Double(_) => Val::Double(0.0),
            _ => Val::Float(0.0),
        }
    }

    /// The real part as an f64 (exact for every real source but 64-bit integers beyond 2^53).
    #[inline(always)]
    pub(crate) fn as_f64(self) -> f64 {
        match self.real() {
            Val::Bool(b) => f64::from(u8::from(b)),
            Val::Int(i) => i as f64,
            Val::UInt(u) => u as f64,
            Val::Float(x) => f64::from(x),
            Val::Double(x) => x,
            Val::CFloat(..) | Val::CDouble(..) => unreachable_real(),
        }
    }
}

#[inline(always)]
fn unreachable_real() -> f64 {
    // `real()` never returns a complex value; a NaN keeps this path total without a panic.
    f64::NAN
}

/// `bool(x)`: nonzero, NaN included; a complex value is true if either part is nonzero.
#[inline(always)]
pub(crate) fn to_bool(v: Val) -> bool {
    match v {
        Val::Bool(b) => b,
        Val::Int(i) => i != 0,
        Val::UInt(u) => u != 0,
        Val::Float(x) => x != 0.0,
        Val::Double(x) => x != 0.0,
        Val::CFloat(re, im) => re != 0.0 || im != 0.0,
        Val::CDouble(re, im) => re != 0.0 || im != 0.0,
    }
}

// ---- float → integer, as x86 `cvtt` instructions do it (torch's scalar path).

/// `cvttsd2si` to 32 bits: truncation; NaN and out-of-range give `i32::MIN`.
///
/// The range starts at -2^31, not at -2^31 - 1 where truncation stops fitting: the values
/// between truncate to `i32::MIN`, the out-of-range answer. Both bounds are then float32 values,
/// so that where `x` is a widened float32, LLVM compares and converts the float32 itself (and
/// vectorises the typed loops of `plain.rs`); the conversion is unchecked because the range is.
#[inline(always)]
pub(crate) fn cvtt32(x: f64) -> i32 {
    if (-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        // SAFETY: `x` is finite and its truncation fits in an i32.
        unsafe { x.to_int_unchecked() }
    } else {
        i32::MIN
    }
}

/// `cvttsd2si` to 64 bits: truncation; NaN and out-of-range give `i64::MIN`.
#[inline(always)]
pub(crate) fn cvtt64(x: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x) {
        // SAFETY: `x` is finite and its truncation fits in an i64.
        unsafe { x.to_int_unchecked() }
    } else {
        i64::MIN
    }
}

/// float → uint64 as compilers lower it on x86: values from 2^63 up are shifted down first.
#[inline(always)]
pub(crate) fn cvtt_u64(x: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if x >= TWO63 {
        (cvtt64(x - TWO63) as u64) ^ (1 << 63)
    } else {
        cvtt64(x) as u64
    }
}

// ---- to float types.

/// The f32 that torch's `static_cast<float>` gives for `v` (its real part).
///
/// `f16_to_f32_quirk`: torch 2.15's copy of a float16 NaN into a float32 tensor writes
/// `0x7FFFFFFF` whatever the NaN (recorded in `torch_cast.json`); other paths through float
/// quiet the NaN and keep its payload.
#[inline(always)]
pub(crate) fn to_f32(v: Val, f16_to_f32_quirk: bool) -> f32 {
    match v.real() {
        Val::Bool(b) => f32::from(u8::from(b)),
        Val::Int(i) => i as f32,
        Val::UInt(u) => u as f32,
        Val::Float(x) if f16_to_f32_quirk && x.is_nan() => f32::from_bits(0x7FFF_FFFF),
        Val::Float(x) => x,
        Val::Double(x) => formats::f64_to_f32(x),
        Val::CFloat(..) | Val::CDouble(..) => f32::NAN,
    }
}

/// The f64 of `v` (its real part): exact, NaN quieted with payload.
#[inline(always)]
pub(crate) fn to_f64(v: Val) -> f64 {
    match v.real() {
        Val::Float(x) => formats::f32_to_f64(x),
        other => other.as_f64(),
    }
}

/// `v` as an f64 from which one rounding to a narrower format is correct: exact for floats,
/// rounded to odd for 64-bit integers. Used by Saturate mode.
#[inline(always)]
pub(crate) fn to_f64_for_rounding(v: Val) -> f64 {
    match v.real() {
        Val::Int(i) => formats::i64_to_f64_odd(i),
        Val::UInt(u) => formats::u64_to_f64_odd(u),
        other => to_f64(other),
    }
}

/// A float8 format with exponent and mantissa, and PyTorch 2.15's rules for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Float8 {
    pub(crate) format: formats::Narrow,
    /// What torch gives for a finite value past the largest: e4m3fn saturates (since PR #178817),
    /// e5m2 overflows to inf, the fnuz formats to NaN.
    pub(crate) torch_overflow: Out,
    /// What torch gives for ±inf.
    pub(crate) torch_inf: Out,
    /// What Saturate mode gives for ±inf (inf where the format has it, else the max).
    pub(crate) saturate_inf: Out,
    /// The f32 bits PyTorch decodes a NaN to.
    pub(crate) nan_to_f32: NanToF32,
}

/// How PyTorch decodes a float8 NaN to f32.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NanToF32 {
    /// e5m2 decodes through float16 (`code << 8`): the NaN is quieted, its payload kept.
    ViaFloat16,
    /// c10's bit formula gives a fixed pattern: e4m3fn `0x7FF00000` with the sign, the fnuz
    /// formats `0x7F800001` (torch_cast.json).
    Fixed { bits: u32, signed: bool },
}

pub(crate) const E4M3FN: Float8 = Float8 {
    format: formats::E4M3FN,
    torch_overflow: Out::Max,
    torch_inf: Out::Max,
    saturate_inf: Out::Max,
    nan_to_f32: NanToF32::Fixed {
        bits: 0x7FF0_0000,
        signed: true,
    },
};
pub(crate) const E5M2: Float8 = Float8 {
    format: formats::E5M2,
    torch_overflow: Out::Inf,
    torch_inf: Out::Inf,
    saturate_inf: Out::Inf,
    nan_to_f32: NanToF32::ViaFloat16,
};
pub(crate) const E4M3FNUZ: Float8 = Float8 {
    format: formats::E4M3FNUZ,
    torch_overflow: Out::Nan,
    torch_inf: Out::Nan,
    saturate_inf: Out::Max,
    nan_to_f32: NanToF32::Fixed {
        bits: 0x7F80_0001,
        signed: false,
    },
};
pub(crate) const E5M2FNUZ: Float8 = Float8 {
    format: formats::E5M2FNUZ,
    torch_overflow: Out::Nan,
    torch_inf: Out::Nan,
    saturate_inf: Out::Max,
    nan_to_f32: NanToF32::Fixed {
        bits: 0x7F80_0001,
        signed: false,
    },
};

/// torch's float8 formats with a mantissa and their rules: the one list (`Float8::of`).
const TORCH_FLOAT8: [(DType, Float8); 4] = [
    (DType::Float8E4M3Fn, E4M3FN),
    (DType::Float8E5M2, E5M2),
    (DType::Float8E4M3Fnuz, E4M3FNUZ),
    (DType::Float8E5M2Fnuz, E5M2FNUZ),
];

impl Float8 {
    /// torch's rules for `dtype`, if it is one of its float8 formats with a mantissa.
    pub(crate) const fn of(dtype: DType) -> Option<Float8> {
        let mut i = 0;
        while i < TORCH_FLOAT8.len() {
            if TORCH_FLOAT8[i].0 as usize == dtype as usize {
                return Some(TORCH_FLOAT8[i].1);
            }
            i += 1;
        }
        None
    }

    /// Torch mode: round the f32 of `v` to nearest-even.
    #[inline(always)]
    pub(crate) fn torch(&self, v: Val) -> u8 {
        let x = f64::from(to_f32(v, false));
        self.format.encode_ending(x, self.ending(false)) as u8
    }

    /// Saturate mode: one rounding from the source value; finite overflow gives the max.
    #[inline(always)]
    pub(crate) fn saturate(&self, v: Val) -> u8 {
        let x = to_f64_for_rounding(v);
        self.format.encode_ending(x, self.ending(true)) as u8
    }

    /// What torch's rounding (`saturate`: dtcast's Saturate) writes past the finite range and for
    /// NaN (the format's NaN in both).
    pub(crate) const fn ending(&self, saturate: bool) -> Ending {
        Ending {
            overflow: if saturate {
                Out::Max
            } else {
                self.torch_overflow
            },
            inf: if saturate {
                self.saturate_inf
            } else {
                self.torch_inf
            },
            nan_is_nan: true,
        }
    }

    /// The f32 PyTorch decodes `code` to (NaN bits included).
    #[inline(always)]
    pub(crate) fn decode(&self, code: u8) -> f32 {
        let code = u32::from(code);
        if self.format.is_nan(code) {
            match self.nan_to_f32 {
                NanToF32::ViaFloat16 => formats::f16_to_f32((code << 8) as u16),
                NanToF32::Fixed { bits, signed } => {
                    let sign = if signed { (code >> 7) << 31 } else { 0 };
                    f32::from_bits(sign | bits)
                }
            }
        } else {
            self.format.decode(code) as f32
        }
    }
}
