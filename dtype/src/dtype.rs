//! The [`DType`] enum and its table of facts.

use core::fmt;

use crate::category::Category;
use crate::format::{self, FloatFormat};
use crate::packing::StorageError;

/// An element type.
///
/// The set is PyTorch's (2.15) minus its quantized and `bits` types and its int3/int5..7 family,
/// plus ml_dtypes' low-precision floats (float8_e4m3, float8_e3m4, float8_e4m3b11fnuz,
/// float8_e5m3fnu, float6, float4). Canonical names are torch's Python names (`float32`, `bfloat16`, `float8_e4m3fn`) and
/// ml_dtypes' for the types torch lacks; see [`DType::name`] and the `FromStr` impl for the
/// accepted spellings.
///
/// Elements narrower than a byte (float6, float4, int4/2/1, uint4/2/1) are stored **packed**: a
/// buffer of them is a little-endian bit stream, element `i` in bits `i·b .. i·b + b` (so two
/// float4 per byte, the first in the low nibble, as torch and safetensors store them). See
/// [`DType::bits`], [`DType::storage_bytes`] and [`crate::packing`].
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
    /// `float8_e4m3` (ml_dtypes): IEEE-like, bias 7, max 240, ±inf `0x78`/`0xF8`.
    Float8E4M3,
    /// `float8_e3m4` (ml_dtypes): IEEE-like, bias 3, max 15.5, ±inf `0x70`/`0xF0`.
    Float8E3M4,
    /// `float8_e4m3b11fnuz` (ml_dtypes): bias 11, max 30, no infinity, no -0, NaN = `0x80`.
    Float8E4M3B11Fnuz,
    /// `float8_e5m3fnu` (ml_dtypes 0.7): unsigned (no sign bit), 5 exponent and 3 mantissa bits,
    /// bias 15, max 114688, no infinity, NaN = `0xFF`; negative values cast to NaN.
    Float8E5M3Fnu,
    /// `float6_e2m3fn` (OCP MX FP6): bias 1, max 7.5, no infinity, no NaN. Stored packed.
    Float6E2M3Fn,
    /// `float6_e3m2fn` (OCP MX FP6): bias 3, max 28, no infinity, no NaN. Stored packed.
    Float6E3M2Fn,
    /// `float4_e2m1fn` (OCP MX FP4): values ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no infinity, no NaN.
    /// Stored packed, two per byte.
    Float4E2M1Fn,
    /// `int4`: -8..=7, two per byte.
    Int4,
    /// `uint4`: 0..=15, two per byte.
    UInt4,
    /// `int2`: -2..=1, four per byte.
    Int2,
    /// `uint2`: 0..=3, four per byte.
    UInt2,
    /// `int1`: -1..=0, eight per byte.
    Int1,
    /// `uint1`: 0..=1, eight per byte.
    UInt1,
    /// `float4_e2m1fn_x2`: torch's storage dtype for float4 — one byte holding two
    /// `float4_e2m1fn` values (the first in the low nibble). Its shape counts bytes; to work with
    /// the values, view the bytes as [`DType::Float4E2M1Fn`] (twice the elements).
    Float4E2M1FnX2,
}

/// Everything the crate knows about one dtype: one row per dtype, in declaration order.
pub(crate) struct Info {
    pub(crate) name: &'static str,
    /// C++ `ScalarType` name, used by PyTorch's error messages (`Float`, `Byte`, ...).
    pub(crate) cpp: &'static str,
    pub(crate) aliases: &'static [&'static str],
    pub(crate) short: &'static [&'static str],
    /// Bits per element in storage (bool: 8).
    pub(crate) bits: u32,
    pub(crate) category: Category,
    pub(crate) format: Option<FloatFormat>,
    /// `(real, complex)` partners: the component type of a complex type, the complex type of a real one.
    pub(crate) real: DType,
    pub(crate) complex: Option<DType>,
    /// The dtype's name in a safetensors header (safetensors 0.8), if it can store it.
    pub(crate) safetensors: Option<&'static str>,
    pub(crate) torch: TorchSupport,
}

/// What PyTorch 2.15 does with a dtype: the line between torch's rules and ml_dtypes' in casts and
/// promotion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TorchSupport {
    /// A torch dtype with value casts (`tensor.to` works between any two of them).
    Casts,
    /// A torch dtype that torch only stores (int1..int4, uint1..uint4 and float4_e2m1fn_x2: `.to()`
    /// fails for every other dtype); its promotion answers are torch's.
    Storage,
    /// Not a torch dtype (ml_dtypes' float8_e4m3, float8_e3m4, float8_e4m3b11fnuz, float8_e5m3fnu,
    /// float6, float4).
    Absent,
}

macro_rules! table {
    ($($variant:ident: $name:literal, $cpp:literal, [$($alias:literal),*], [$($short:literal),*],
       $bits:literal, $cat:ident, $format:expr, $real:ident, $complex:expr, $safetensors:expr,
       $torch:ident;)*) => {
        /// The table. Row order = declaration order of [`DType`] (checked by a test).
        static INFO: [Info; DType::COUNT] = [$(Info {
            name: $name,
            cpp: $cpp,
            aliases: &[$($alias),*],
            short: &[$($short),*],
            bits: $bits,
            category: Category::$cat,
            format: $format,
            real: DType::$real,
            complex: $complex,
            safetensors: $safetensors,
            torch: TorchSupport::$torch,
        }),*];

        impl DType {
            /// Every dtype, in declaration order (which is also the order of `dtcast table`).
            pub const ALL: [DType; DType::COUNT] = [$(DType::$variant),*];
        }
    };
}

use format as f;
use DType as D;

// One row per dtype: variant: name, C++ ScalarType name, aliases, short names, bits, category,
// float format, real partner, complex partner, safetensors name, what torch 2.15 does with it.
#[rustfmt::skip]
table! {
    Bool: "bool", "Bool", [], [], 8, Bool, None, Bool, None, Some("BOOL"), Casts;
    UInt8: "uint8", "Byte", [], ["u8"], 8, UnsignedInt, None, UInt8, None, Some("U8"), Casts;
    Int8: "int8", "Char", [], ["i8"], 8, SignedInt, None, Int8, None, Some("I8"), Casts;
    Int16: "int16", "Short", ["short"], ["i16"], 16, SignedInt, None, Int16, None, Some("I16"), Casts;
    Int32: "int32", "Int", ["int"], ["i32"], 32, SignedInt, None, Int32, None, Some("I32"), Casts;
    Int64: "int64", "Long", ["long"], ["i64"], 64, SignedInt, None, Int64, None, Some("I64"), Casts;
    UInt16: "uint16", "UInt16", [], ["u16"], 16, UnsignedInt, None, UInt16, None, Some("U16"), Casts;
    UInt32: "uint32", "UInt32", [], ["u32"], 32, UnsignedInt, None, UInt32, None, Some("U32"), Casts;
    UInt64: "uint64", "UInt64", [], ["u64"], 64, UnsignedInt, None, UInt64, None, Some("U64"), Casts;
    Float16: "float16", "Half", ["half"], ["f16"], 16, Floating, Some(f::FLOAT16), Float16, Some(D::Complex32), Some("F16"), Casts;
    BFloat16: "bfloat16", "BFloat16", [], ["bf16"], 16, Floating, Some(f::BFLOAT16), BFloat16, Some(D::BComplex32), Some("BF16"), Casts;
    Float32: "float32", "Float", ["float"], ["f32"], 32, Floating, Some(f::FLOAT32), Float32, Some(D::Complex64), Some("F32"), Casts;
    Float64: "float64", "Double", ["double"], ["f64"], 64, Floating, Some(f::FLOAT64), Float64, Some(D::Complex128), Some("F64"), Casts;
    Complex32: "complex32", "ComplexHalf", ["chalf"], ["c32"], 32, Complex, None, Float16, Some(D::Complex32), None, Casts;
    Complex64: "complex64", "ComplexFloat", ["cfloat"], ["c64"], 64, Complex, None, Float32, Some(D::Complex64), Some("C64"), Casts;
    Complex128: "complex128", "ComplexDouble", ["cdouble"], ["c128"], 128, Complex, None, Float64, Some(D::Complex128), None, Casts;
    BComplex32: "bcomplex32", "BComplex32", [], ["bc32"], 32, Complex, None, BFloat16, Some(D::BComplex32), None, Casts;
    Float8E4M3Fn: "float8_e4m3fn", "Float8_e4m3fn", [], ["f8e4m3fn"], 8, Floating, Some(f::FLOAT8_E4M3FN), Float8E4M3Fn, None, Some("F8_E4M3"), Casts;
    Float8E5M2: "float8_e5m2", "Float8_e5m2", [], ["f8e5m2"], 8, Floating, Some(f::FLOAT8_E5M2), Float8E5M2, None, Some("F8_E5M2"), Casts;
    Float8E4M3Fnuz: "float8_e4m3fnuz", "Float8_e4m3fnuz", [], ["f8e4m3fnuz"], 8, Floating, Some(f::FLOAT8_E4M3FNUZ), Float8E4M3Fnuz, None, Some("F8_E4M3FNUZ"), Casts;
    Float8E5M2Fnuz: "float8_e5m2fnuz", "Float8_e5m2fnuz", [], ["f8e5m2fnuz"], 8, Floating, Some(f::FLOAT8_E5M2FNUZ), Float8E5M2Fnuz, None, Some("F8_E5M2FNUZ"), Casts;
    Float8E8M0Fnu: "float8_e8m0fnu", "Float8_e8m0fnu", [], ["f8e8m0fnu", "f8e8m0"], 8, Floating, Some(f::FLOAT8_E8M0FNU), Float8E8M0Fnu, None, Some("F8_E8M0"), Casts;
    Float8E4M3: "float8_e4m3", "Float8_e4m3", [], ["f8e4m3"], 8, Floating, Some(f::ieee(4, 3)), Float8E4M3, None, None, Absent;
    Float8E3M4: "float8_e3m4", "Float8_e3m4", [], ["f8e3m4"], 8, Floating, Some(f::ieee(3, 4)), Float8E3M4, None, None, Absent;
    Float8E4M3B11Fnuz: "float8_e4m3b11fnuz", "Float8_e4m3b11fnuz", [], ["f8e4m3b11fnuz"], 8, Floating, Some(f::fnuz(4, 3, 11)), Float8E4M3B11Fnuz, None, None, Absent;
    Float8E5M3Fnu: "float8_e5m3fnu", "Float8_e5m3fnu", [], ["f8e5m3fnu"], 8, Floating, Some(f::unsigned_finite(5, 3, 15)), Float8E5M3Fnu, None, None, Absent;
    Float6E2M3Fn: "float6_e2m3fn", "Float6_e2m3fn", [], ["f6e2m3fn", "f6e2m3"], 6, Floating, Some(f::finite_only(2, 3)), Float6E2M3Fn, None, Some("F6_E2M3"), Absent;
    Float6E3M2Fn: "float6_e3m2fn", "Float6_e3m2fn", [], ["f6e3m2fn", "f6e3m2"], 6, Floating, Some(f::finite_only(3, 2)), Float6E3M2Fn, None, Some("F6_E3M2"), Absent;
    Float4E2M1Fn: "float4_e2m1fn", "Float4_e2m1fn", [], ["f4e2m1fn", "f4e2m1"], 4, Floating, Some(f::finite_only(2, 1)), Float4E2M1Fn, None, Some("F4"), Absent;
    Int4: "int4", "Int4", [], ["i4"], 4, SignedInt, None, Int4, None, None, Storage;
    UInt4: "uint4", "UInt4", [], ["u4"], 4, UnsignedInt, None, UInt4, None, None, Storage;
    Int2: "int2", "Int2", [], ["i2"], 2, SignedInt, None, Int2, None, None, Storage;
    UInt2: "uint2", "UInt2", [], ["u2"], 2, UnsignedInt, None, UInt2, None, None, Storage;
    Int1: "int1", "Int1", [], ["i1"], 1, SignedInt, None, Int1, None, None, Storage;
    UInt1: "uint1", "UInt1", [], ["u1"], 1, UnsignedInt, None, UInt1, None, None, Storage;
    Float4E2M1FnX2: "float4_e2m1fn_x2", "Float4_e2m1fn_x2", [], ["f4e2m1fnx2"], 8, Floating, None, Float4E2M1FnX2, None, None, Storage;
}

impl DType {
    /// How many dtypes there are.
    pub const COUNT: usize = 36;

    /// The position of this dtype in [`DType::ALL`]; handy for indexing per-dtype tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub(crate) const fn info(self) -> &'static Info {
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

    /// Bits per element in storage: 8 for bool, 6 for the float6 types, 4 for float4 and
    /// int4/uint4. This is the truth about sizes; byte counts come from
    /// [`DType::storage_bytes`] and [`DType::elements_in`].
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Complex128.bits(), 128);
    /// assert_eq!(DType::Float6E2M3Fn.bits(), 6);
    /// assert_eq!(DType::UInt1.bits(), 1);
    /// ```
    pub const fn bits(self) -> usize {
        self.info().bits as usize
    }

    /// Bytes per element for the dtypes whose elements are whole bytes; `None` for the packed
    /// (sub-byte) ones.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Complex128.byte_size(), Some(16));
    /// assert_eq!(DType::Float4E2M1FnX2.byte_size(), Some(1));
    /// assert_eq!(DType::Int4.byte_size(), None);
    /// ```
    pub const fn byte_size(self) -> Option<usize> {
        let bits = self.bits();
        if bits.is_multiple_of(8) {
            Some(bits / 8)
        } else {
            None
        }
    }

    /// `true` for the dtypes stored several elements to a byte (fewer than 8 bits each).
    pub const fn is_packed(self) -> bool {
        self.bits() < 8
    }

    /// The bytes that `elements` elements occupy, or an error when they do not end at a byte
    /// boundary (3 int4, 2 float6) or their bits overflow `usize` — the one place where element
    /// counts become byte counts, so that a packed buffer is never cut inside a byte
    /// (safetensors refuses such slices too).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Float32.storage_bytes(3), Ok(12));
    /// assert_eq!(DType::Float4E2M1Fn.storage_bytes(6), Ok(3));
    /// assert_eq!(DType::Float6E3M2Fn.storage_bytes(4), Ok(3));
    /// let err = DType::Int4.storage_bytes(3).unwrap_err();
    /// assert_eq!(err.to_string(), "3 int4 elements (4 bits each) do not end at a byte boundary");
    /// let err = DType::BFloat16.storage_bytes(1 << 60).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "1152921504606846976 bfloat16 elements (16 bits each) have more bytes than memory can address"
    /// );
    /// ```
    pub fn storage_bytes(self, elements: usize) -> Result<usize, StorageError> {
        match elements.checked_mul(self.bits()) {
            Some(bits) if bits.is_multiple_of(8) => Ok(bits / 8),
            _ => Err(StorageError::NotByteAligned {
                dtype: self,
                elements,
            }),
        }
    }

    /// How many elements `bytes` bytes hold, or `None` when they do not hold a whole number
    /// (5 bytes of float32, 2 bytes of float6).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// assert_eq!(DType::Float32.elements_in(8), Some(2));
    /// assert_eq!(DType::UInt1.elements_in(2), Some(16));
    /// assert_eq!(DType::Float6E2M3Fn.elements_in(3), Some(4));
    /// assert_eq!(DType::Float6E2M3Fn.elements_in(2), None);
    /// ```
    pub fn elements_in(self, bytes: usize) -> Option<usize> {
        let bits = bytes.checked_mul(8)?;
        bits.is_multiple_of(self.bits()).then(|| bits / self.bits())
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

    /// What torch 2.15 does with this dtype.
    ///
    /// ```
    /// use dtcast_dtype::{DType, TorchSupport};
    /// assert_eq!(DType::Float8E4M3Fn.torch_support(), TorchSupport::Casts);
    /// assert_eq!(DType::Int4.torch_support(), TorchSupport::Storage);
    /// assert_eq!(DType::Float4E2M1Fn.torch_support(), TorchSupport::Absent);
    /// ```
    pub const fn torch_support(self) -> TorchSupport {
        self.info().torch
    }

    /// The category (bool, signed/unsigned integer, floating, complex).
    pub const fn category(self) -> Category {
        self.info().category
    }

    /// `true` for real floating types, float8 included (torch's `is_floating_point`).
    pub const fn is_floating_point(self) -> bool {
        matches!(self.category(), Category::Floating)
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
            // float4_e2m1fn_x2 (no format of its own) holds signed float4 values.
            Category::Floating => self.info().format.is_none_or(|f| f.signed),
        }
    }

    /// `true` for the float8 formats (8-bit floats with a [`FloatFormat`]; not the
    /// `float4_e2m1fn_x2` byte, which holds two float4).
    pub fn is_float8(self) -> bool {
        self.float_format().is_some() && self.bits() == 8
    }

    /// `true` for PyTorch's "barebones" unsigned types (`uint16`, `uint32`, `uint64`, and the
    /// sub-byte `uint1`, `uint2`, `uint4`), which promote only with floating types.
    pub fn is_barebones_unsigned(self) -> bool {
        matches!(
            self,
            D::UInt16 | D::UInt32 | D::UInt64 | D::UInt4 | D::UInt2 | D::UInt1
        )
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
    /// [`DType::to_real`]; `float4_e2m1fn_x2` is a byte holding two [`DType::Float4E2M1Fn`]).
    pub const fn float_format(self) -> Option<FloatFormat> {
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
    fn complex_bits_are_twice_the_real_part() {
        for dt in DType::ALL.iter().filter(|d| d.is_complex()) {
            assert_eq!(dt.bits(), 2 * dt.to_real().bits(), "{dt}");
        }
    }

    #[test]
    fn storage_bytes_and_elements_in_agree() {
        for dt in DType::ALL {
            for n in 0..40 {
                match dt.storage_bytes(n) {
                    Ok(bytes) => assert_eq!(dt.elements_in(bytes), Some(n), "{dt} {n}"),
                    Err(e) => assert_ne!((n * dt.bits()) % 8, 0, "{dt} {n}: {e}"),
                }
            }
        }
        assert!(DType::Int1.storage_bytes(usize::MAX).is_err());
    }

    #[test]
    fn safetensors_names_read_back() {
        // F4 is written for both float4 dtypes; it reads back as float4_e2m1fn (shape in values).
        assert_eq!(
            DType::from_safetensors_name("F4"),
            Some(DType::Float4E2M1Fn)
        );
        for dt in DType::ALL {
            if let Some(name) = dt.safetensors_name() {
                let back = DType::from_safetensors_name(name).unwrap();
                assert!(back == dt || dt == DType::Float4E2M1FnX2, "{dt}");
            }
        }
    }

    #[test]
    fn float_formats_fill_their_bits() {
        for dt in DType::ALL {
            if let Some(f) = dt.float_format() {
                assert_eq!(f.total_bits() as usize, dt.bits(), "{dt}");
            }
            let shell = dt == DType::Float4E2M1FnX2;
            assert_eq!(
                dt.float_format().is_some(),
                dt.is_floating_point() && !shell,
                "{dt}"
            );
        }
    }
}
