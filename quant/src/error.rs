//! What can go wrong.

use std::fmt;

use dtcast_dtype::DType;

/// An error from quantizing or dequantizing: what was wrong and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantError {
    /// No scheme has this name.
    UnknownScheme {
        /// The name given.
        name: String,
    },
    /// The scheme's dtypes do not fit together.
    Scheme {
        /// Why.
        reason: String,
    },
    /// The shape does not suit the scheme (e.g. columns not a multiple of the group size).
    Shape {
        /// Why.
        reason: String,
    },
    /// A buffer's length is not what the shape and the scheme need.
    Length {
        /// Which buffer (`elements`, `scales`).
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        given: usize,
    },
    /// The scheme needs a global scale and none was given, or one was given that it has no use for.
    GlobalScale {
        /// What the scheme needs.
        needed: bool,
    },
    /// The input dtype is not one the scheme's reference quantizes (see
    /// [`Scheme::check_input`](crate::Scheme::check_input)).
    InputDType {
        /// The dtype given.
        dtype: DType,
        /// What the reference (or the kernels asked) read instead.
        reads: &'static str,
    },
    /// The output dtype is not one dequantization writes.
    OutputDType {
        /// The dtype asked for.
        dtype: DType,
    },
    /// A buffer the shape needs cannot be allocated (a tensor of zero columns and 2^40 rows
    /// still has 2^40 per-channel scales).
    Memory {
        /// Which buffer (`scales`, `elements`, `output`).
        what: &'static str,
        /// Bytes needed.
        bytes: usize,
    },
}

impl fmt::Display for QuantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantError::UnknownScheme { name } => write!(
                f,
                "unknown scheme `{name}`; known: {}, {}",
                crate::scheme::NAMES.join(", "),
                crate::Scheme::INTEGER_NAMES.join(", ")
            ),
            QuantError::Shape { reason } => write!(f, "{reason}"),
            QuantError::Scheme { reason } => write!(f, "the scheme does not work: {reason}"),
            QuantError::Length {
                what,
                needed,
                given,
            } => write!(
                f,
                "the {what} {} {given} bytes; the shape and scheme need {needed}",
                if what.ends_with('s') { "hold" } else { "holds" }
            ),
            QuantError::GlobalScale { needed: true } => {
                write!(
                    f,
                    "this scheme needs the tensor's global scale, and none was given"
                )
            }
            QuantError::GlobalScale { needed: false } => {
                write!(f, "this scheme has no global scale, but one was given")
            }
            QuantError::InputDType { dtype, reads } => {
                write!(f, "{dtype} weights are not quantized here: {reads}")
            }
            QuantError::OutputDType { dtype } => write!(
                f,
                "dequantization writes float32, bfloat16 or float16, not {dtype}"
            ),
            QuantError::Memory { what, bytes } => write!(
                f,
                "the {what} of this shape take {bytes} bytes, more than can be allocated here"
            ),
        }
    }
}

impl std::error::Error for QuantError {}
