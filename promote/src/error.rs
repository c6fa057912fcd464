//! Promotion errors, with PyTorch's messages.

use core::fmt;

use dtcast_dtype::DType;

use crate::operand::ScalarKind;

/// Why promotion failed. `Display` prints PyTorch's own message where PyTorch has one.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromoteError {
    /// A float8 type met a different type (torch refuses to guess a common type).
    Float8 {
        /// First operand type.
        a: DType,
        /// Second operand type.
        b: DType,
    },
    /// uint16/32/64 met a type that is not floating.
    BarebonesUnsigned {
        /// First operand type.
        a: DType,
        /// Second operand type.
        b: DType,
    },
    /// A complex result was needed for a real type that has no complex partner (float8).
    NoComplexType(DType),
    /// `result_type` got no operands.
    NoOperands,
    /// The common dtype of an operation cannot be written to the output dtype (a lower category).
    CannotCastOutput {
        /// The operation's common dtype.
        common: DType,
        /// The output's dtype.
        out: DType,
    },
    /// The default dtype must be float16, bfloat16, float32 or float64.
    InvalidDefaultDType(DType),
    /// A dtype this policy does not have (the Torch policy and ml_dtypes' float8_e4m3, float6,
    /// float4...).
    NotInPolicy {
        /// The dtype.
        dtype: DType,
        /// The policy's name.
        policy: &'static str,
    },
    /// Two dtypes with no common type above them in a policy's lattice (JAX: the 8-, 6- and
    /// 4-bit floats and the 1-, 2- and 4-bit integers with anything but themselves, bool and
    /// weak scalars).
    NoCommonDType {
        /// First operand type.
        a: DType,
        /// Second operand type.
        b: DType,
        /// The policy's name.
        policy: &'static str,
    },
    /// A Python int that does not fit the dtype NumPy converts it to (NEP 50: `uint8 array +
    /// 300`).
    PythonIntOutOfBounds {
        /// The int.
        value: i128,
        /// The operation's result dtype.
        dtype: DType,
    },
    /// More operands than one `result_type` takes (NumPy's limit of 64, the most a ufunc has).
    TooManyOperands {
        /// How many were given.
        count: usize,
        /// The most accepted.
        max: usize,
    },
    /// Two dtypes the Array API standard does not promote together, and the rule that says so.
    ArrayApi {
        /// First operand type.
        a: DType,
        /// Second operand type.
        b: DType,
        /// Why not.
        rule: ArrayApiRule,
    },
    /// A Python scalar of a kind the Array API standard does not promote with arrays of
    /// `dtype` (a float with an integer array, an int with a bool array, ...).
    ArrayApiScalar {
        /// The scalar's kind.
        scalar: ScalarKind,
        /// The arrays' dtype.
        dtype: DType,
    },
    /// Python scalars and no array: the Array API standard gives them no dtype.
    ArrayApiNoArray,
    /// A torch dtype without a row in `c10::promoteTypes`' table (int1..int4,
    /// float4_e2m1fn_x2): torch fails an internal assertion (`ix_a != -1`).
    NoTableEntry {
        /// First operand type.
        a: DType,
        /// Second operand type.
        b: DType,
    },
}

/// Which of the Array API standard's rules refuses two dtypes.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrayApiRule {
    /// Promotion stays within a kind: bool, the integers, the floating types.
    KindsDiffer,
    /// No signed integer holds every value of both (uint64 with a signed integer).
    NoSignedHoldsBoth,
}

impl fmt::Display for PromoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PromoteError::Float8 { a, b } => write!(
                f,
                "Promotion for Float8 Types is not supported, attempted to promote {} and {}",
                a.cpp_name(),
                b.cpp_name()
            ),
            PromoteError::BarebonesUnsigned { a, b } => write!(
                f,
                "Promotion for uint16, uint32, uint64 types is not supported, attempted to promote {} and {}",
                a.cpp_name(),
                b.cpp_name()
            ),
            PromoteError::NoComplexType(dt) => {
                write!(f, "Unknown Complex ScalarType for {}", dt.cpp_name())
            }
            PromoteError::NoOperands => f.write_str("result_type needs at least one operand"),
            PromoteError::CannotCastOutput { common, out } => write!(
                f,
                "result type {} can't be cast to the desired output type {}",
                common.cpp_name(),
                out.cpp_name()
            ),
            PromoteError::NotInPolicy { dtype, policy } => {
                let article = if policy.starts_with(['A', 'E', 'I', 'O', 'U']) {
                    "an"
                } else {
                    "a"
                };
                write!(
                    f,
                    "{dtype} is not {article} {policy} dtype, so the {policy} rules cannot promote it"
                )
            }
            PromoteError::NoCommonDType { a, b, policy: "JAX" } => write!(
                f,
                "Input dtypes ('{a}', '{b}') have no available implicit dtype promotion path \
                 (JAX's lattice has no type above both; cast one explicitly)"
            ),
            PromoteError::NoCommonDType { a, b, policy: "NumPy" } => write!(
                f,
                "The DTypes {a} and {b} do not have a common DType (cast one explicitly)"
            ),
            PromoteError::PythonIntOutOfBounds { value, dtype } if dtype.is_integral(false) => {
                write!(f, "Python integer {value} out of bounds for {dtype}")
            }
            PromoteError::PythonIntOutOfBounds { value, dtype } => write!(
                f,
                "Python integer {value} does not fit a C long, and ml_dtypes converts Python ints \
                 to {dtype} through one"
            ),
            PromoteError::TooManyOperands { count, max } => write!(
                f,
                "result_type got {count} operands; it takes at most {max} (NumPy's limit for a ufunc)"
            ),
            PromoteError::NoCommonDType { a, b, policy } => write!(
                f,
                "the {policy} rules have no common dtype for {a} and {b}"
            ),
            PromoteError::ArrayApi { a, b, rule: ArrayApiRule::KindsDiffer } => write!(
                f,
                "{a} and {b} cannot be promoted together: the Array API promotes only within a \
                 kind (bool; the integers; the real and complex floating types)"
            ),
            PromoteError::ArrayApi { a, b, rule: ArrayApiRule::NoSignedHoldsBoth } => write!(
                f,
                "{a} and {b} cannot be promoted together: the Array API has no signed integer \
                 that holds every value of both"
            ),
            PromoteError::ArrayApiScalar { scalar: ScalarKind::Int, dtype } => write!(
                f,
                "Python int scalars cannot be promoted with bool arrays (the Array API; these are \
                 {dtype})"
            ),
            PromoteError::ArrayApiScalar { scalar: ScalarKind::Bool, dtype } => write!(
                f,
                "Python bool scalars can only be promoted with bool arrays (the Array API; these \
                 are {dtype})"
            ),
            PromoteError::ArrayApiScalar { scalar, dtype } => write!(
                f,
                "Python {} scalars can only be promoted with floating-point arrays (the Array API; \
                 these are {dtype})",
                match scalar {
                    ScalarKind::Complex => "complex",
                    ScalarKind::Float | ScalarKind::Int | ScalarKind::Bool => "float",
                }
            ),
            PromoteError::ArrayApiNoArray => f.write_str(
                "result_type needs at least one array or dtype: the Array API gives Python scalars \
                 alone no dtype",
            ),
            PromoteError::NoTableEntry { a, b } => write!(
                f,
                "torch has no promotion rule for {} and {} (its promoteTypes table has no row for \
                 them: `ix_a != -1 INTERNAL ASSERT FAILED`)",
                a.cpp_name(),
                b.cpp_name()
            ),
            PromoteError::InvalidDefaultDType(dt) => write!(
                f,
                "only floating-point types are supported as the default type (float16, bfloat16, float32, float64), got {dt}"
            ),
        }
    }
}

impl core::error::Error for PromoteError {}
