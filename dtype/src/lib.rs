//! The dtype set of dtcast: PyTorch's dtypes and ml_dtypes' low-precision ones, down to 1 bit.
//!
//! [`DType`] names the 36 element types dtcast knows. Everything about a dtype that does not depend on
//! values — its names, size, category and (for floating types) the exact encoding — lives here, in
//! one table. [`Element`] maps Rust element types to their dtype.
//!
//! ```
//! use dtcast_dtype::{Category, DType};
//!
//! let dt: DType = "bf16".parse()?;
//! assert_eq!(dt, DType::BFloat16);
//! assert_eq!(dt.to_string(), "bfloat16");
//! assert_eq!(dt.bits(), 16);
//! assert_eq!(DType::Float4E2M1Fn.storage_bytes(6)?, 3); // packed, two per byte
//! assert_eq!(dt.category(), Category::Floating);
//! assert_eq!(dt.to_complex(), Some(DType::BComplex32));
//!
//! let e4m3 = DType::Float8E4M3Fn.float_format().unwrap();
//! assert_eq!(e4m3.max_finite, 448.0);
//! assert!(!e4m3.has_inf);
//!
//! let err = "float65".parse::<DType>().unwrap_err();
//! assert_eq!(err.suggestion(), Some(DType::Float64));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;

mod category;
mod dtype;
mod element;
mod float8;
mod format;
pub mod packing;
mod parse;
mod shape;
mod values;

pub use category::Category;
pub use dtype::{DType, TorchSupport};
pub use element::Element;
pub use float8::*;
pub use format::{FloatFormat, NanEncoding};
pub use parse::ParseDTypeError;
pub use shape::{Excess, ShapeError, MAX_SHAPE_SIZE};

/// Re-exported so that users of [`Element`] name the same `half` types.
pub use half;
/// Re-exported so that users of [`Element`] name the same `Complex` type.
pub use num_complex;

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
