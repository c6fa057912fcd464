//! Cast errors.

use core::fmt;

use dtcast_dtype::DType;

/// Why a cast failed. Nothing is written to the destination when a cast fails.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CastError {
    /// The source and destination hold different numbers of elements.
    LengthMismatch {
        /// Source dtype.
        from: DType,
        /// Destination dtype.
        to: DType,
        /// Elements in the source.
        src_elements: usize,
        /// Elements the destination has room for.
        dst_elements: usize,
    },
    /// A byte buffer's length is not a whole number of elements.
    PartialElement {
        /// The dtype.
        dtype: DType,
        /// The buffer's length in bytes.
        len: usize,
    },
    /// The elements do not fill whole bytes of the destination's packed storage (3 int4 values).
    NotByteAligned {
        /// The destination dtype.
        dtype: DType,
        /// The element count.
        elements: usize,
    },
    /// A dtype pair with no value cast: `float4_e2m1fn_x2` holds two values per element, so its
    /// bytes are cast as `float4_e2m1fn` (a bitcast view with twice the elements).
    Unsupported {
        /// Source dtype.
        from: DType,
        /// Destination dtype.
        to: DType,
    },
    /// The output buffer of an allocating cast ([`cast_to_vec`](crate::cast_to_vec)) could not
    /// be allocated.
    OutOfMemory {
        /// Its size.
        bytes: usize,
    },
    /// An element the destination cannot hold (Checked mode) or whose value would change (Exact).
    Value {
        /// Index of the first offending element.
        index: usize,
        /// Its value, as text (`300.0`, `NaN`, `(1.0+2.0j)`).
        value: String,
        /// Source dtype.
        from: DType,
        /// Destination dtype.
        to: DType,
        /// What is wrong with it.
        kind: ValueErrorKind,
    },
}

impl CastError {
    /// The error of a cast of part of a buffer, as the error of the whole: a `Value` error's
    /// element index moved on by `first`, the index of the part's first element.
    ///
    /// ```
    /// use dtcast_cast::{cast_to_vec, CastError, CastMode};
    /// use dtcast_dtype::DType;
    /// let part = f32::NAN.to_le_bytes();
    /// let e = cast_to_vec(&part, DType::Float32, DType::Int32, CastMode::Checked).unwrap_err();
    /// assert!(matches!(e.offset_by(1000), CastError::Value { index: 1000, .. }));
    /// ```
    #[must_use]
    pub fn offset_by(self, first: usize) -> CastError {
        match self {
            CastError::Value {
                index,
                value,
                from,
                to,
                kind,
            } => CastError::Value {
                index: index + first,
                value,
                from,
                to,
                kind,
            },
            other => other,
        }
    }
}

/// What is wrong with an element.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueErrorKind {
    /// Outside the destination's range (an integer range, or the positive values of e8m0).
    OutOfRange,
    /// NaN or ±inf into a type that cannot hold it.
    NotFinite,
    /// A finite value past the destination's largest finite value.
    Overflow,
    /// A nonzero imaginary part that a cast to a real type would drop.
    ImaginaryPart,
    /// The value changes (Exact mode); the value the cast would produce.
    Inexact {
        /// The value the destination would hold, as text.
        result: String,
    },
}

impl fmt::Display for CastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CastError::LengthMismatch { from, to, src_elements, dst_elements } => write!(
                f,
                "length mismatch: the source holds {src_elements} {from} elements but the destination has room for {dst_elements} {to} elements"
            ),
            CastError::PartialElement { dtype, len } => write!(
                f,
                "{len} bytes is not a whole number of {dtype} elements ({} bits each)",
                dtype.bits()
            ),
            CastError::NotByteAligned { dtype, elements } => {
                // `StorageError`'s words, overflow included.
                let storage = dtcast_dtype::packing::StorageError::NotByteAligned {
                    dtype: *dtype,
                    elements: *elements,
                };
                write!(f, "{storage}")
            }
            CastError::Unsupported { from, to } => write!(
                f,
                "no value cast from {from} to {to}: float4_e2m1fn_x2 holds two float4 values per \
                 element; view its bytes as float4_e2m1fn (twice the elements) and cast those"
            ),
            CastError::OutOfMemory { bytes } => {
                write!(f, "out of memory: the cast's output needs {bytes} bytes")
            }
            CastError::Value { index, value, from, to, kind } => {
                write!(f, "element {index} ({value}) ")?;
                match kind {
                    ValueErrorKind::OutOfRange => write!(f, "is out of range for {to}"),
                    ValueErrorKind::NotFinite => write!(f, "cannot be represented in {to}"),
                    ValueErrorKind::Overflow => write!(f, "overflows {to}"),
                    ValueErrorKind::ImaginaryPart => {
                        write!(f, "has a nonzero imaginary part, which a cast from {from} to {to} would drop")
                    }
                    ValueErrorKind::Inexact { result } => {
                        write!(f, "changes value in a cast from {from} to {to} (it would become {result})")
                    }
                }
            }
        }
    }
}

impl std::error::Error for CastError {}
