//! Bitcasts: reading the bytes of one dtype as another, and what that does to the shape.
//!
//! A [`Rule`] says how the shape changes; two are provided:
//! - [`Xla`]: JAX's `lax.bitcast_convert_type` / XLA's `BitcastConvert` — narrowing appends a minor
//!   dimension of the width ratio, widening removes a minor dimension that must equal the ratio,
//!   and a complex type only bitcasts to itself. `bool` counts as 8 bits (so `int64[.., 8]` ↔ `bool`
//!   works, as Paddle's CINN expects), unlike XLA's 1-bit `PRED`.
//! - [`View`]: torch's `Tensor.view(dtype)` on a contiguous tensor — the last dimension is scaled
//!   by the itemsize ratio, and a 0-dim tensor only views a dtype of the same itemsize.
//!
//! The bytes never change: [`bitcast`] validates a buffer against its shape and returns the new
//! shape with the same bytes, and [`reinterpret`] views bytes as typed elements without copying
//! unless the buffer is misaligned.
//!
//! ```
//! use dtcast_bitcast::{Rule, View, Xla};
//! use dtcast_dtype::DType;
//!
//! assert_eq!(Xla.infer(&[2, 3], DType::Float32, DType::UInt8)?, vec![2, 3, 4]);
//! assert_eq!(View.infer(&[2, 3], DType::Float32, DType::UInt8)?, vec![2, 12]);
//! assert_eq!(Xla.infer(&[5, 2], DType::Float32, DType::Float64)?, vec![5]);
//! assert_eq!(View.infer(&[5, 2], DType::Float32, DType::Float64)?, vec![5, 1]);
//! assert!(View.infer(&[], DType::Float32, DType::UInt8).is_err());
//! # Ok::<(), dtcast_bitcast::BitcastError>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

mod buffer;
mod error;
mod rule;

pub use buffer::{bitcast, reinterpret, Bitcast};
pub use error::BitcastError;
pub use rule::{Rule, View, Xla};

pub use dtcast_dtype::DType;

/// The number of elements of a shape, or `None` if it overflows `usize`.
///
/// ```
/// assert_eq!(dtcast_bitcast::numel(&[2, 3, 4]), Some(24));
/// assert_eq!(dtcast_bitcast::numel(&[]), Some(1));
/// assert_eq!(dtcast_bitcast::numel(&[usize::MAX, 2]), None);
/// ```
pub fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
