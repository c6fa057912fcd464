//! The numbers behind the CPU rules, as data: what a code generator needs to write the same
//! rules in another language. `dtcast-device` writes the per-dtype part of its CUDA kernels from
//! these (and from `dtcast-dtype`'s table), so the GPU's rules cannot drift from the CPU's.
//!
//! ```
//! use dtcast_cast::layout::{ml_format, torch_float8, Special};
//! use dtcast_dtype::DType;
//! let f = ml_format(DType::Float4E2M1Fn).unwrap();
//! assert_eq!((f.exp_bits, f.man_bits, f.max_mag, f.has_nan), (2, 1, 0x7, false));
//! let e5m2 = torch_float8(DType::Float8E5M2).unwrap();
//! assert_eq!(e5m2.format.nan_code, 0x7F); // torch's NaN byte; ml_dtypes writes 0x7E
//! assert_eq!(e5m2.overflow, Special::Inf);
//! assert!(torch_float8(DType::Float8E4M3).is_none()); // not a torch dtype
//! ```

use dtcast_dtype::DType;

use crate::formats::{Narrow, Out};
use crate::rules::{self, NanToF32};

/// The bit layout of a narrow floating format, as the encoders use it (an unsigned format's
/// sign bit is the bit above its code, never set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatLayout {
    /// Exponent bits.
    pub exp_bits: u32,
    /// Mantissa bits.
    pub man_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// The magnitude code of the largest finite value.
    pub max_mag: u32,
    /// The magnitude code of infinity, if the format has one.
    pub inf_mag: Option<u32>,
    /// Whether the format has a NaN.
    pub has_nan: bool,
    /// The code written for a positive NaN (for a format without NaN: what its NaN rule writes).
    pub nan_code: u32,
    /// Whether a negative NaN flips the sign bit of `nan_code`.
    pub nan_signed: bool,
    /// `false` where -0 is not a value (the fnuz formats): a negative zero encodes as +0.
    pub neg_zero: bool,
    /// `false` for an unsigned format (`float8_e5m3fnu`): a negative value is past its range,
    /// and gets the rules of an overflow (`Max` there means its lowest value, 0).
    pub signed: bool,
}

/// What an encoder writes for a value its format cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// ±infinity.
    Inf,
    /// The format's NaN.
    Nan,
    /// ±the largest finite value.
    Max,
}

/// torch 2.15's rules for one of its float8 formats with exponent and mantissa.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TorchFloat8 {
    /// The layout torch encodes with (its NaN byte).
    pub format: FormatLayout,
    /// What torch writes for a finite value past the largest.
    pub overflow: Special,
    /// What torch writes for ±inf.
    pub inf: Special,
    /// What Saturate mode writes for ±inf.
    pub saturate_inf: Special,
    /// The float32 bits torch decodes a NaN to, and whether the code's sign is kept; `None`:
    /// through float16 (`code << 8`), payload kept.
    pub nan_to_f32: Option<(u32, bool)>,
}

fn layout(n: &Narrow) -> FormatLayout {
    FormatLayout {
        exp_bits: n.exp_bits,
        man_bits: n.man_bits,
        bias: n.bias,
        max_mag: n.max_mag,
        inf_mag: n.inf_mag,
        has_nan: n.has_nan,
        nan_code: n.nan_code,
        nan_signed: n.nan_signed,
        neg_zero: n.neg_zero,
        signed: n.signed,
    }
}

fn special(out: Out) -> Special {
    match out {
        Out::Inf => Special::Inf,
        Out::Nan => Special::Nan,
        Out::Max => Special::Max,
    }
}

/// The layout ml_dtypes' rules (and Saturate mode's, for the formats torch lacks) encode `dtype`
/// with; `None` for a dtype that is not a floating format with a mantissa (e8m0, which has its
/// own encoder; integers, complex).
pub fn ml_format(dtype: DType) -> Option<FormatLayout> {
    let f = dtype.float_format()?;
    (f.mantissa_bits > 0).then(|| layout(&Narrow::of(dtype)))
}

/// torch's rules for `dtype` if it is one of torch's float8 formats with a mantissa.
pub fn torch_float8(dtype: DType) -> Option<TorchFloat8> {
    let f = rules::Float8::of(dtype)?;
    Some(TorchFloat8 {
        format: layout(&f.format),
        overflow: special(f.torch_overflow),
        inf: special(f.torch_inf),
        saturate_inf: special(f.saturate_inf),
        nan_to_f32: match f.nan_to_f32 {
            NanToF32::ViaFloat16 => None,
            NanToF32::Fixed { bits, signed } => Some((bits, signed)),
        },
    })
}
