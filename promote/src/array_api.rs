//! The Python Array API standard's promotion (API version 2025.12), as its strict reference
//! implementation `array-api-strict` 2.6.1 gives it: a lattice strictly within each kind, no
//! answer across kinds, and Python scalars that must match the array's kind.

use dtcast_dtype::{Category, DType};

use crate::error::{ArrayApiRule, PromoteError};
use crate::operand::{Operand, ScalarKind};
use crate::policy::Policy;

use DType as D;

/// The Array API standard's type promotion (`xp.result_type`, `xp.can_cast`), with
/// `array-api-strict` 2.6.1's answers and errors.
///
/// **Dtypes**: bool, int8..int64, uint8..uint64, float32, float64, complex64, complex128 — the
/// standard has no float16 or bfloat16.
///
/// **Promotion** stays within a kind: the signed integers, the unsigned ones, and a signed
/// integer with an unsigned one wide enough to hold both (`uint8 ∨ int8` is int16, `uint32 ∨
/// int32` int64); the real floats; the complex types, which also take the real floats
/// (`float64 ∨ complex64` is complex128). Everything else has no result: bool with anything but
/// bool, an integer with a float, `uint64` with any signed integer.
///
/// **`result_type`** promotes the arrays (0-d arrays are arrays, nothing like torch's
/// precedence), from the left, and then takes each Python scalar in turn: a `bool` only with a
/// bool result; an `int` with an integer result it fits (its value, where known), or with a
/// floating or complex one; a `float` only with a floating or complex result; a `complex` with a
/// floating result, which becomes its complex type. Scalars alone are an error.
///
/// **`can_cast`** is the standard's: a cast that promotion would make (`promote_types(from, to)
/// == to`). NumPy's `same_kind` level, which the standard does not have, is the same here.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_promote::{ArrayApi, Operand, Policy, ScalarKind};
/// let xp = ArrayApi;
/// assert_eq!(xp.promote_types(DType::UInt8, DType::Int8)?, DType::Int16);
/// assert_eq!(xp.promote_types(DType::Float64, DType::Complex64)?, DType::Complex128);
/// assert!(xp.promote_types(DType::Int32, DType::Float32).is_err()); // kinds never mix
/// assert!(xp.promote_types(DType::UInt64, DType::Int8).is_err());
/// let ops = [Operand::Tensor(DType::Float32), Operand::WrappedScalar(ScalarKind::Complex)];
/// assert_eq!(xp.result_type(&ops)?, DType::Complex64);
/// let ops = [Operand::Tensor(DType::Int8), Operand::WrappedScalar(ScalarKind::Float)];
/// assert!(xp.result_type(&ops).is_err()); // a float scalar needs a floating array
/// let ops = [Operand::Tensor(DType::UInt8), Operand::IntLiteral(300)];
/// assert!(xp.result_type(&ops).is_err()); // it must fit uint8
/// assert!(xp.can_cast(DType::Int8, DType::Int64));
/// assert!(!xp.can_cast(DType::Int8, DType::Float64));
/// # Ok::<(), dtcast_promote::PromoteError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArrayApi;

impl ArrayApi {
    /// The standard's dtypes, in the order `xp` lists them.
    pub const DTYPES: [DType; 13] = [
        D::Bool,
        D::Int8,
        D::Int16,
        D::Int32,
        D::Int64,
        D::UInt8,
        D::UInt16,
        D::UInt32,
        D::UInt64,
        D::Float32,
        D::Float64,
        D::Complex64,
        D::Complex128,
    ];

    fn check(dtype: DType) -> Result<DType, PromoteError> {
        if ArrayApi::DTYPES.contains(&dtype) {
            Ok(dtype)
        } else {
            Err(PromoteError::NotInPolicy {
                dtype,
                policy: "Array API",
            })
        }
    }
}

/// The smallest signed integer of at least `bits` bits, if the standard has one.
fn signed_of(bits: usize) -> Option<DType> {
    [D::Int8, D::Int16, D::Int32, D::Int64]
        .into_iter()
        .find(|d| d.bits() >= bits)
}

/// The join of two of the standard's dtypes, or the rule that refuses them.
fn join(a: DType, b: DType) -> Result<DType, PromoteError> {
    let wider = |x: DType, y: DType| if x.bits() >= y.bits() { x } else { y };
    let refuse = |rule| Err(PromoteError::ArrayApi { a, b, rule });
    match (a.category(), b.category()) {
        _ if a == b => Ok(a),
        (Category::SignedInt, Category::SignedInt)
        | (Category::UnsignedInt, Category::UnsignedInt)
        | (Category::Floating, Category::Floating) => Ok(wider(a, b)),
        (Category::SignedInt, Category::UnsignedInt)
        | (Category::UnsignedInt, Category::SignedInt) => {
            let (s, u) = if a.is_signed() { (a, b) } else { (b, a) };
            // A signed type holds every value of an unsigned one of fewer bits.
            match signed_of(s.bits().max(u.bits() + 1)) {
                Some(t) => Ok(t),
                None => refuse(ArrayApiRule::NoSignedHoldsBoth),
            }
        }
        (Category::Complex, Category::Complex) => Ok(wider(a, b)),
        (Category::Complex, Category::Floating) | (Category::Floating, Category::Complex) => {
            let (c, f) = if a.is_complex() { (a, b) } else { (b, a) };
            Ok(if c.to_real().bits() >= f.bits() {
                c
            } else {
                D::Complex128
            })
        }
        _ => refuse(ArrayApiRule::KindsDiffer),
    }
}

/// The result of `dtype` (a result so far) with one Python scalar, or the rule it breaks.
fn with_scalar(dtype: DType, scalar: Operand) -> Result<DType, PromoteError> {
    let category = dtype.category();
    let integer = matches!(category, Category::SignedInt | Category::UnsignedInt);
    let inexact = matches!(category, Category::Floating | Category::Complex);
    let refuse = |kind| {
        Err(PromoteError::ArrayApiScalar {
            scalar: kind,
            dtype,
        })
    };
    match scalar {
        Operand::WrappedScalar(ScalarKind::Bool) if category == Category::Bool => Ok(dtype),
        Operand::WrappedScalar(ScalarKind::Bool) => refuse(ScalarKind::Bool),
        Operand::WrappedScalar(ScalarKind::Int) if integer || inexact => Ok(dtype),
        Operand::IntLiteral(value) if integer => match dtype.integer_range() {
            Some((lo, hi)) if (lo..=hi).contains(&value) => Ok(dtype),
            _ => Err(PromoteError::PythonIntOutOfBounds { value, dtype }),
        },
        Operand::IntLiteral(_) if inexact => Ok(dtype),
        Operand::WrappedScalar(ScalarKind::Int) | Operand::IntLiteral(_) => refuse(ScalarKind::Int),
        Operand::WrappedScalar(ScalarKind::Float) if inexact => Ok(dtype),
        Operand::WrappedScalar(ScalarKind::Float) => refuse(ScalarKind::Float),
        Operand::WrappedScalar(ScalarKind::Complex) if inexact => {
            Ok(dtype.to_complex().unwrap_or(D::Complex128))
        }
        Operand::WrappedScalar(ScalarKind::Complex) => refuse(ScalarKind::Complex),
        // Arrays are taken before the scalars.
        Operand::Tensor(_) | Operand::ZeroDim(_) => Ok(dtype),
    }
}

impl Policy for ArrayApi {
    fn name(&self) -> &'static str {
        "Array API"
    }

    fn has_dtype(&self, dtype: DType) -> bool {
        ArrayApi::DTYPES.contains(&dtype)
    }

    /// `xp.result_type(a, b)` of two dtypes.
    fn promote_types(&self, a: DType, b: DType) -> Result<DType, PromoteError> {
        join(ArrayApi::check(a)?, ArrayApi::check(b)?)
    }

    /// `xp.result_type(*operands)`: the arrays from the left, then each Python scalar.
    fn result_type(&self, operands: &[Operand]) -> Result<DType, PromoteError> {
        if operands.is_empty() {
            return Err(PromoteError::NoOperands);
        }
        let mut arrays = operands.iter().filter_map(|op| match *op {
            Operand::Tensor(dt) | Operand::ZeroDim(dt) => Some(dt),
            Operand::WrappedScalar(_) | Operand::IntLiteral(_) => None,
        });
        let first = arrays.next().ok_or(PromoteError::ArrayApiNoArray)?;
        let mut result = ArrayApi::check(first)?;
        for dt in arrays {
            result = join(result, ArrayApi::check(dt)?)?;
        }
        for &op in operands {
            result = with_scalar(result, op)?;
        }
        Ok(result)
    }

    /// `xp.can_cast(from, to)`: promotion would make the cast.
    fn can_cast(&self, from: DType, to: DType) -> bool {
        self.promote_types(from, to) == Ok(to)
    }

    /// float64, the standard's default real floating type (array-api-strict's).
    fn default_dtype(&self) -> DType {
        D::Float64
    }

    /// complex128.
    fn default_complex_dtype(&self) -> DType {
        D::Complex128
    }
}
