//! Bitcast errors.

use core::fmt;

use alloc::borrow::ToOwned;
use alloc::string::ToString;
use alloc::vec::Vec;

use dtcast_dtype::{DType, ShapeError};

/// Why a bitcast was refused. Each variant names the rule (`xla` or `view`) and the numbers that
/// did not fit. The [`View`](crate::View) messages are torch's own.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BitcastError {
    /// `xla`: complex types only bitcast to themselves.
    Complex {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
    },
    /// `xla`: widening needs a last dimension equal to the width ratio.
    LastDimNotRatio {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
        /// The input shape.
        shape: Vec<usize>,
        /// The width ratio the last dimension must equal.
        ratio: usize,
    },
    /// `view`: a 0-dim tensor only views a dtype of the same itemsize.
    ZeroDim {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
    },
    /// `view`: widening needs the last dimension divisible by the ratio.
    LastDimNotDivisible {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
        /// The last dimension.
        last: usize,
        /// The itemsize ratio.
        ratio: usize,
    },
    /// `view`: widening needs every outer stride (of the contiguous layout) divisible by the ratio.
    StrideNotDivisible {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
        /// The dimension whose stride does not divide.
        dim: usize,
        /// Its stride, in elements.
        stride: usize,
        /// The itemsize ratio.
        ratio: usize,
    },
    /// A shape (the input's, or the one a rule computes) is too large: a dimension, its element
    /// count or its size in bytes is more than 2^63 - 1 ([`dtcast_dtype::MAX_SHAPE_SIZE`]).
    Overflow(ShapeError),
    /// A buffer's length does not match its shape and dtype.
    ByteLength {
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes the buffer has.
        actual: usize,
    },
    /// A byte length is not a whole number of elements.
    PartialElement {
        /// The dtype.
        dtype: DType,
        /// The byte length.
        len: usize,
    },
    /// `xla`: a widening whose width is not a multiple of the source's (float6 -> 8 bits).
    Widths {
        /// Source dtype.
        from: DType,
        /// Target dtype.
        to: DType,
    },
    /// `view`: a dtype torch does not have (float6, float4 and ml_dtypes' float8 variants).
    NotTorch {
        /// The dtype.
        dtype: DType,
    },
    /// The rule's shape does not describe the buffer once it is read as the new dtype — torch's
    /// `view` counts int4/int2/int1 as one byte each, while dtcast stores them packed.
    Storage {
        /// The rule.
        rule: &'static str,
        /// Target dtype.
        to: DType,
        /// The shape the rule gave.
        shape: Vec<usize>,
        /// Bytes in the buffer.
        bytes: usize,
    },
    /// A byte that is not 0 or 1 was read as `bool`.
    InvalidBool {
        /// The element index.
        index: usize,
        /// The byte found.
        byte: u8,
    },
}

impl fmt::Display for BitcastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BitcastError::*;
        match self {
            Complex { from, to } => write!(
                f,
                "xla rule: cannot bitcast {from} to {to}: a complex type can only be bitcast to itself"
            ),
            LastDimNotRatio { from, to, shape, ratio } => write!(
                f,
                "xla rule: cannot bitcast {from}{shape:?} to {to}: widening by {ratio}x needs the last dimension to be {ratio}, but got {}",
                match shape.last() {
                    Some(d) => d.to_string(),
                    None => "a 0-dim shape".to_owned(),
                }
            ),
            ZeroDim { from, to } => write!(
                f,
                "view rule: self.dim() cannot be 0 to view {} as {} (different element sizes)",
                from.cpp_name(),
                to.cpp_name()
            ),
            LastDimNotDivisible { from, to, last, ratio } => write!(
                f,
                "view rule: self.size(-1) must be divisible by {ratio} to view {} as {} (different element sizes), but got {last}",
                from.cpp_name(),
                to.cpp_name()
            ),
            StrideNotDivisible { from, to, dim, stride, ratio } => write!(
                f,
                "view rule: self.stride({dim}) must be divisible by {ratio} to view {} as {} (different element sizes), but got {stride}",
                from.cpp_name(),
                to.cpp_name()
            ),
            Overflow(e) => e.fmt(f),
            ByteLength { expected, actual } => write!(
                f,
                "buffer holds {actual} bytes but its shape and dtype need {expected}"
            ),
            PartialElement { dtype, len } => write!(
                f,
                "{len} bytes is not a whole number of {dtype} elements ({} bits each)",
                dtype.bits()
            ),
            Widths { from, to } => write!(
                f,
                "xla: cannot bitcast {from} ({} bits) to {to} ({} bits): no number of {from} elements makes one {to}",
                from.bits(),
                to.bits()
            ),
            NotTorch { dtype } => write!(
                f,
                "view: torch has no dtype {dtype}; use the xla rule for it"
            ),
            Storage { rule, to, shape, bytes } => write!(
                f,
                "{rule}: shape {shape:?} of {to} does not describe {bytes} bytes \
                 (dtcast stores {to} packed, {} bits per element)",
                to.bits()
            ),
            InvalidBool { index, byte } => write!(
                f,
                "element {index} is the byte {byte:#04x}, which is not a bool (0 or 1)"
            ),
        }
    }
}

impl core::error::Error for BitcastError {}
