//! The [`DType`] enum and its table of facts.

use core::fmt;

use crate::category::Category;
use crate::format::{self, FloatFormat};

/// An element type.
///
/// The set is PyTorch's (2.15) minus the quantized, bit, sub-byte and float4 types, which have no
/// value casts in PyTorch either. Canonical names are torch's Python names (`float32`, `bfloat16`,
/// `float8_e4m3fn`); see [`DType::name`] and the `FromStr` impl for the accepted spellings.
///
/// `bcomplex32` (complex with bfloat16 parts) is here because PyTorch 2.15's promotion produces it
/// (`bfloat16` tensor + complex scalar), so `result_type` cannot be exact without it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// `bool`: one byte, 0 or 1.
    Bool,
    /// `uint8`.
    UInt8,
    /// `int8`.
    Int8,
    /// `int16` (`short`).
    Int16,
    /// `int32` (`int`).
    Int32,
    /// `int64` (`long`).
    Int64,
    /// `uint16` (one of PyTorch's "barebones" unsigned types).
    UInt16,
    /// `uint32`.
    UInt32,
    /// `uint64`.
    UInt64,
    /// `float16` (`half`): IEEE binary16.
    Float16,
    /// `bfloat16`: the top half of a binary32.
    BFloat16,
    /// `float32` (`float`).
    Float32,
    /// `float64` (`double`).
    Float64,
    /// `complex32` (`chalf`): two float16.
    Complex32,
    /// `complex64` (`cfloat`): two float32.
    Complex64,
    /// `complex128` (`cdouble`): two float64.
    Complex128,
    /// `bcomplex32`: two bfloat16 (new in PyTorch 2.15).
    BComplex32,
    /// `float8_e4m3fn`: 4 exponent bits, 3 mantissa bits, no infinity, NaN = `S.1111.111`.
    Float8E4M3Fn,
    /// `float8_e5m2`: 5 exponent bits, 2 mantissa bits, IEEE-like with infinities.
    Float8E5M2,
    /// `float8_e4m3fnuz`: bias 8, no infinity, no -0, NaN = `0x80`.
    Float8E4M3Fnuz,
    /// `float8_e5m2fnuz`: bias 16, no infinity, no -0, NaN = `0x80`.
    Float8E5M2Fnuz,
    /// `float8_e8m0fnu`: an unsigned power of two (exponent only), NaN = `0xFF`, no zero.
    Float8E8M0Fnu,
}

/// Everything the crate knows about one dtype: one row per dtype, in declaration order.
pub(crate) struct Info {
    pub(crate) name: &'static str,
    /// C++ `ScalarType` name, used by PyTorch's error messages (`Float`, `Byte`, ...).
    pub(crate) cpp: &'static str,
    pub(crate) aliases: &'static [&'static str],
    pub(crate) short: &'static [&'static str],
    pub(crate) itemsize: usize,
    pub(crate) category: Category,
    pub(crate) format: Option<FloatFormat>,
    /// `(real, complex)` partners: the component type of a complex type, the complex type of a real one.
    pub(crate) real: DType,
    pub(crate) complex: Option<DType>,
    /// The dtype's name in a safetensors header (safetensors 0.8), if it can store it.
    pub(crate) safetensors: Option<&'static str>,
}

macro_rules! info {
    ($name:literal, $cpp:literal, [$($alias:literal),*], [$($short:literal),*], $size:literal,
     $cat:ident, $format:expr, $real:ident, $complex:expr, $safetensors:expr) => {
        Info {
            name: $name,
            cpp: $cpp,
            aliases: &[$($alias),*],
            short: &[$($short),*],
            itemsize: $size,
            category: Category::$cat,
            format: $format,
            real: DType::$real,
            complex: $complex,
            safetensors: $safetensors,
        }
    };
}

use DType as D;

/// The table. Row order = declaration order of [`DType`] (checked by a test).
static INFO: [Info; DType::COUNT] = [
    info!(
        "bool",
        "Bool",
        [],
        [],
        1,
        Bool,
        None,
        Bool,
        None,
        Some("BOOL")
    ),
    info!(
        "uint8",
        "Byte",
        [],
        ["u8"],
        1,
        UnsignedInt,
        None,
        UInt8,
        None,
        Some("U8")
    ),
    info!(
        "int8",
        "Char",
        [],
        ["i8"],
        1,
        SignedInt,
        None,
        Int8,
        None,
        Some("I8")
    ),
    info!(
        "int16",
        "Short",
        ["short"],
        ["i16"],
        2,
        SignedInt,
        None,
        Int16,
        None,
        Some("I16")
    ),
    info!(
        "int32",
        "Int",
        ["int"],
        ["i32"],
        4,
        SignedInt,
        None,
        Int32,
        None,
        Some("I32")
    ),
    info!(
        "int64",
        "Long",
        ["long"],
        ["i64"],
        8,
        SignedInt,
        None,
        Int64,
        None,
        Some("I64")
    ),
    info!(
        "uint16",
        "UInt16",
        [],
        ["u16"],
        2,
        UnsignedInt,
        None,
        UInt16,
        None,
        Some("U16")
    ),
    info!(
        "uint32",
        "UInt32",
        [],
        ["u32"],
        4,
        UnsignedInt,
        None,
        UInt32,
        None,
        Some("U32")
    ),
    info!(
        "uint64",
        "UInt64",
        [],
        ["u64"],
        8,
        UnsignedInt,
        None,
        UInt64,
        None,
        Some("U64")
    ),
    info!(
        "float16",
        "Half",
        ["half"],
        ["f16"],
        2,
        Floating,
        Some(format::FLOAT16),
        Float16,
        Some(D::Complex32),
        Some("F16")
    ),
    info!(
        "bfloat16",
        "BFloat16",
        [],
        ["bf16"],
        2,
        Floating,
        Some(format::BFLOAT16),
        BFloat16,
        Some(D::BComplex32),
        Some("BF16")
    ),
    info!(
        "float32",
        "Float",
        ["float"],
        ["f32"],
        4,
        Floating,
        Some(format::FLOAT32),
        Float32,
        Some(D::Complex64),
        Some("F32")
    ),
    info!(
        "float64",
        "Double",
        ["double"],
        ["f64"],
        8,
        Floating,
        Some(format::FLOAT64),
        Float64,
        Some(D::Complex128),
        Some("F64")
    ),
    info!(
        "complex32",
        "ComplexHalf",
        ["chalf"],
        ["c32"],
        4,
        Complex,
        None,
        Float16,
        Some(D::Complex32),
        None
    ),
    info!(
        "complex64",
        "ComplexFloat",
        ["cfloat"],
        ["c64"],
        8,
        Complex,
        None,
        Float32,
        Some(D::Complex64),
        Some("C64")
    ),
    info!(
        "complex128",
        "ComplexDouble",
        ["cdouble"],
        ["c128"],
        16,
        Complex,
        None,
        Float64,
        Some(D::Complex128),
        None
    ),
    info!(
        "bcomplex32",
        "BComplex32",
        [],
        ["bc32"],
        4,
        Complex,
        None,
        BFloat16,
        Some(D::BComplex32),
        None
    ),
    info!(
        "float8_e4m3fn",
        "Float8_e4m3fn",
        [],
        ["f8e4m3fn", "f8e4m3"],
        1,
        Floating,
        Some(format::FLOAT8_E4M3FN),
        Float8E4M3Fn,
        None,
        Some("F8_E4M3")
    ),
    info!(
        "float8_e5m2",
        "Float8_e5m2",
        [],
        ["f8e5m2"],
        1,
        Floating,
        Some(format::FLOAT8_E5M2),
        Float8E5M2,
        None,
        Some("F8_E5M2")
    ),
    info!(
        "float8_e4m3fnuz",
        "Float8_e4m3fnuz",
        [],
        ["f8e4m3fnuz"],
        1,
        Floating,
        Some(format::FLOAT8_E4M3FNUZ),
        Float8E4M3Fnuz,
        None,
        Some("F8_E4M3FNUZ")
    ),
    info!(
        "float8_e5m2fnuz",
        "Float8_e5m2fnuz",
        [],
        ["f8e5m2fnuz"],
        1,
        Floating,
        Some(format::FLOAT8_E5M2FNUZ),
        Float8E5M2Fnuz,
        None,
        Some("F8_E5M2FNUZ")
    ),
    info!(
        "float8_e8m0fnu",
        "Float8_e8m0fnu",
        [],
        ["f8e8m0fnu", "f8e8m0"],
        1,
        Floating,
        Some(format::FLOAT8_E8M0FNU),
        Float8E8M0Fnu,
        None,
        Some("F8_E8M0")
    ),
];

impl DType {
    /// How many dtypes there are.
    pub const COUNT: usize = 22;

    /// Every dtype, in declaration order (which is also the order of `dtcast table`).
    pub const ALL: [DType; DType::COUNT] = [
        D::Bool,
        D::UInt8,
        D::Int8,
        D::Int16,
        D::Int32,
        D::Int64,
        D::UInt16,
        D::UInt32,
        D::UInt64,
        D::Float16,
        D::BFloat16,
        D::Float32,
        D::Float64,
        D::Complex32,
        D::Complex64,
        D::Complex128,
        D::BComplex32,
        D::Float8E4M3Fn,
        D::Float8E5M2,
        D::Float8E4M3Fnuz,
        D::Float8E5M2Fnuz,
        D::Float8E8M0Fnu,
    ];

    /// The position of this dtype in [`DType::ALL`]; handy for indexing per-dtype tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn info(self) -> &'static Info {
        &INFO[self.index()]
    }

    /// The canonical name: torch's Python name without the `torch.` prefix.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Float8E4M3Fn.name(), "float8_e4m3fn");
    /// ```
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The name of PyTorch's C++ `ScalarType`, as its error messages print it (`Float`, `Byte`, `Half`).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::UInt8.cpp_name(), "Byte");
    /// assert_eq!(DType::Complex64.cpp_name(), "ComplexFloat");
    /// ```
    pub fn cpp_name(self) -> &'static str {
        self.info().cpp
    }

    /// Other names torch accepts for this dtype (`half`, `long`, `cfloat`, ...).
    pub fn aliases(self) -> &'static [&'static str] {
        self.info().aliases
    }

    /// Short forms (`f32`, `bf16`, `i64`, `u8`, `c64`, `f8e4m3fn`, ...).
    pub fn short_names(self) -> &'static [&'static str] {
        self.info().short
    }

    /// Bytes per element.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Complex128.itemsize(), 16);
    /// assert_eq!(DType::Float8E5M2.itemsize(), 1);
    /// ```
    pub fn itemsize(self) -> usize {
        self.info().itemsize
    }

    /// Bits per element in storage (`8 * itemsize`; bool counts as 8).
    pub fn bits(self) -> usize {
        8 * self.itemsize()
    }

    /// The dtype's name in a safetensors header (`BF16`, `F8_E4M3`), or `None` for the dtypes
    /// safetensors 0.8 cannot store (complex32, complex128, bcomplex32).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::BFloat16.safetensors_name(), Some("BF16"));
    /// assert_eq!(DType::Float8E4M3Fn.safetensors_name(), Some("F8_E4M3"));
    /// assert_eq!(DType::Complex128.safetensors_name(), None);
    /// ```
    pub fn safetensors_name(self) -> Option<&'static str> {
        self.info().safetensors
    }

    /// The dtype a safetensors header names (`F32` → float32); `None` for a name safetensors
    /// does not have or dtcast does not support.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::from_safetensors_name("F8_E5M2"), Some(DType::Float8E5M2));
    /// assert_eq!(DType::from_safetensors_name("f32"), None); // case-sensitive, as in the format
    /// ```
    pub fn from_safetensors_name(name: &str) -> Option<DType> {
        DType::ALL
            .into_iter()
            .find(|dt| dt.safetensors_name() == Some(name))
    }

    /// The category (bool, signed/unsigned integer, floating, complex).
    pub fn category(self) -> Category {
        self.info().category
    }

    /// `true` for real floating types, float8 included (torch's `is_floating_point`).
    pub fn is_floating_point(self) -> bool {
        self.category() == Category::Floating
    }

    /// `true` for complex types.
    pub fn is_complex(self) -> bool {
        self.category() == Category::Complex
    }

    /// `true` for integer types; `include_bool` also counts `bool` (torch's `isIntegralType`).
    pub fn is_integral(self, include_bool: bool) -> bool {
        self.category().is_integer() || (include_bool && self == D::Bool)
    }

    /// `true` when the type can hold negative values (torch's `is_signed`): signed integers, every
    /// floating and complex type except `float8_e8m0fnu`.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert!(DType::Int8.is_signed());
    /// assert!(!DType::UInt8.is_signed());
    /// assert!(!DType::Bool.is_signed());
    /// assert!(!DType::Float8E8M0Fnu.is_signed());
    /// ```
    pub fn is_signed(self) -> bool {
        match self.category() {
            Category::Bool | Category::UnsignedInt => false,
            Category::SignedInt | Category::Complex => true,
            Category::Floating => self.info().format.is_some_and(|f| f.signed),
        }
    }

    /// `true` for the float8 formats.
    pub fn is_float8(self) -> bool {
        self.is_floating_point() && self.itemsize() == 1
    }

    /// `true` for PyTorch's "barebones" unsigned types (`uint16`, `uint32`, `uint64`), which have
    /// restricted promotion rules.
    pub fn is_barebones_unsigned(self) -> bool {
        matches!(self, D::UInt16 | D::UInt32 | D::UInt64)
    }

    /// The complex type with this type's precision (torch's `to_complex`): float16 → complex32,
    /// float32 → complex64, float64 → complex128, bfloat16 → bcomplex32; a complex type maps to
    /// itself. `None` for the others (torch: `Unknown Complex ScalarType for ...`).
    pub fn to_complex(self) -> Option<DType> {
        self.info().complex
    }

    /// The real type of the same precision (torch's `to_real`): the component type of a complex
    /// type, the type itself otherwise.
    pub fn to_real(self) -> DType {
        self.info().real
    }

    /// The exact encoding of a real floating type; `None` for the others (complex types: see
    /// [`DType::to_real`]).
    pub fn float_format(self) -> Option<FloatFormat> {
        self.info().format
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_follow_declaration_order() {
        for (i, dt) in DType::ALL.iter().enumerate() {
            assert_eq!(dt.index(), i);
            // Each row's real partner has the same precision family: round trip through to_real.
            if let Some(c) = dt.to_complex() {
                assert!(c.is_complex());
                assert_eq!(c.to_real().to_complex(), Some(c));
            }
        }
    }

    #[test]
    fn complex_itemsize_is_twice_the_real_part() {
        for dt in DType::ALL.iter().filter(|d| d.is_complex()) {
            assert_eq!(dt.itemsize(), 2 * dt.to_real().itemsize(), "{dt}");
        }
    }

    #[test]
    fn float_formats_fill_their_itemsize() {
        for dt in DType::ALL {
            if let Some(f) = dt.float_format() {
                assert_eq!(f.total_bits() as usize, dt.bits(), "{dt}");
            }
            assert_eq!(dt.float_format().is_some(), dt.is_floating_point(), "{dt}");
        }
    }
}
