//! How large a shape may be: one rule for every shape dtcast reads or computes — a bitcast's
//! shapes, a safetensors header's. Each dimension, the element count and the size in bytes must
//! be at most 2^63 - 1 ([`MAX_SHAPE_SIZE`]): what a signed 64-bit integer holds, the type torch
//! gives sizes, element counts and byte sizes (`size()`, `numel()`, `nbytes`), and so the most
//! any reader of a checkpoint can index. A shape past it is an error naming the shape and what
//! is too large — never a size that wrapped, and never one accepted here that no reader loads.
//!
//! ```
//! use dtcast_dtype::{DType, ShapeError};
//! assert_eq!(DType::Float32.shape_elements(&[2, 3]), Ok(6));
//! assert_eq!(DType::Float32.shape_elements(&[0, 1 << 63]).unwrap_err().to_string(),
//!            "shape [0, 9223372036854775808] is too large: dimension 1 is more than 2^63 - 1");
//! // 2^62 float32 elements are 2^64 bytes.
//! let e = DType::Float32.shape_elements(&[1 << 62, 1]).unwrap_err();
//! assert_eq!(e.to_string(),
//!            "shape [4611686018427387904, 1] of float32 is too large: its size in bytes is more than 2^63 - 1");
//! ```

use alloc::vec::Vec;
use core::fmt;

use crate::DType;

/// The most a dimension, an element count or a size in bytes may be: `i64::MAX`.
pub const MAX_SHAPE_SIZE: u64 = i64::MAX as u64;

/// A shape too large for [`MAX_SHAPE_SIZE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    /// The shape.
    pub shape: Vec<usize>,
    /// The dtype of its elements.
    pub dtype: DType,
    /// What is too large.
    pub excess: Excess,
}

/// What part of a shape is too large.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Excess {
    /// The dimension at this index.
    Dimension(usize),
    /// The element count (the product of the dimensions).
    Elements,
    /// The size in bytes (whole bytes, a packed dtype's last byte counted).
    Bytes,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = &self.shape;
        match self.excess {
            Excess::Dimension(i) => write!(
                f,
                "shape {shape:?} is too large: dimension {i} is more than 2^63 - 1"
            ),
            Excess::Elements => write!(
                f,
                "shape {shape:?} is too large: its element count is more than 2^63 - 1"
            ),
            Excess::Bytes => write!(
                f,
                "shape {shape:?} of {} is too large: its size in bytes is more than 2^63 - 1",
                self.dtype
            ),
        }
    }
}

impl core::error::Error for ShapeError {}

impl DType {
    /// The element count of a tensor of `shape` and this dtype, where every dimension, the count
    /// and the size in bytes are at most [`MAX_SHAPE_SIZE`]; otherwise what is too large.
    pub fn shape_elements(self, shape: &[usize]) -> Result<usize, ShapeError> {
        let error = |excess| ShapeError {
            shape: shape.to_vec(),
            dtype: self,
            excess,
        };
        let mut elements: u128 = 1;
        for (i, &d) in shape.iter().enumerate() {
            if d as u128 > u128::from(MAX_SHAPE_SIZE) {
                return Err(error(Excess::Dimension(i)));
            }
            // Both factors are at most 2^63 here, so the product fits u128.
            elements = (elements * d as u128).min(u128::from(MAX_SHAPE_SIZE) + 1);
        }
        if elements > u128::from(MAX_SHAPE_SIZE) {
            return Err(error(Excess::Elements));
        }
        if (elements * self.bits() as u128).div_ceil(8) > u128::from(MAX_SHAPE_SIZE) {
            return Err(error(Excess::Bytes));
        }
        usize::try_from(elements).map_err(|_| error(Excess::Elements))
    }
}
