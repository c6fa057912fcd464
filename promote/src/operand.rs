//! Operands of an operation, as promotion sees them.

use core::fmt;

use dtcast_dtype::DType;

/// The kind of a Python-style scalar (a "wrapped number" in ATen).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    /// `True` / `False`.
    Bool,
    /// An integer literal: int64, whatever its value (`uint8 + 300` stays uint8 and wraps).
    Int,
    /// A float literal: takes the policy's default dtype.
    Float,
    /// A complex literal: takes the policy's default complex dtype.
    Complex,
}

impl ScalarKind {
    /// The kind of scalar a 0-dim tensor of `dtype` becomes when ATen reads it as a `Scalar`
    /// (`Tensor.item()`, or a 0-dim tensor passed to an op's `Scalar` overload): integers of every
    /// width become `Int`, floating types `Float`, complex types `Complex`.
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_promote::ScalarKind;
    /// assert_eq!(ScalarKind::of(DType::UInt8), ScalarKind::Int);
    /// assert_eq!(ScalarKind::of(DType::BFloat16), ScalarKind::Float);
    /// ```
    pub fn of(dtype: DType) -> ScalarKind {
        use dtcast_dtype::Category;
        match dtype.category() {
            Category::Bool => ScalarKind::Bool,
            Category::SignedInt | Category::UnsignedInt => ScalarKind::Int,
            Category::Floating => ScalarKind::Float,
            Category::Complex => ScalarKind::Complex,
        }
    }

    /// The dtype ATen gives the scalar before the default-dtype substitution
    /// (bool, int64, float64, complex128).
    pub fn wrapped_dtype(self) -> DType {
        match self {
            ScalarKind::Bool => DType::Bool,
            ScalarKind::Int => DType::Int64,
            ScalarKind::Float => DType::Float64,
            ScalarKind::Complex => DType::Complex128,
        }
    }
}

/// One operand of an operation. Where a dtype comes from decides how much it counts: a tensor with
/// dimensions beats a 0-dim tensor, which beats a wrapped scalar — unless the lower one belongs to
/// a higher category (bool < integer < floating < complex).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A tensor with at least one dimension (shape `[2]`, `[1]` and `[0]` all count).
    Tensor(DType),
    /// A 0-dim tensor (shape `[]`).
    ZeroDim(DType),
    /// A Python scalar wrapped into a tensor, its value unknown or irrelevant. Every policy has
    /// its rule for these: torch gives them the lowest priority, JAX and NumPy (NEP 50) make
    /// int, float and complex scalars *weak* (they take the other operands' dtype within their
    /// kind), and all three treat a Python bool as a bool.
    WrappedScalar(ScalarKind),
    /// A Python int whose value is known. Only NumPy looks at it: its ufuncs convert the int
    /// to the result dtype, so `uint8 array + 300` is an error there (NEP 50). Torch and JAX
    /// read it as `WrappedScalar(ScalarKind::Int)` (`uint8 + 300` is uint8 and wraps).
    IntLiteral(i128),
}

impl Operand {
    /// The operand with its value dropped: an [`IntLiteral`](Operand::IntLiteral) becomes
    /// `WrappedScalar(ScalarKind::Int)`; anything else is unchanged.
    ///
    /// ```
    /// use dtcast_promote::{Operand, ScalarKind};
    /// assert_eq!(Operand::IntLiteral(300).without_value(), Operand::WrappedScalar(ScalarKind::Int));
    /// ```
    pub fn without_value(self) -> Operand {
        match self {
            Operand::IntLiteral(_) => Operand::WrappedScalar(ScalarKind::Int),
            other => other,
        }
    }
}

impl fmt::Display for Operand {
    /// The fixture / CLI spelling: `int8[2]`, `int8[]`, `True`, `3`, `2.5`, `(1+2j)`, `300`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Tensor(dt) => write!(f, "{dt}[2]"),
            Operand::ZeroDim(dt) => write!(f, "{dt}[]"),
            Operand::WrappedScalar(ScalarKind::Bool) => f.write_str("True"),
            Operand::WrappedScalar(ScalarKind::Int) => f.write_str("3"),
            Operand::WrappedScalar(ScalarKind::Float) => f.write_str("2.5"),
            Operand::WrappedScalar(ScalarKind::Complex) => f.write_str("(1+2j)"),
            Operand::IntLiteral(value) => write!(f, "{value}"),
        }
    }
}
