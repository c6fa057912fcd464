//! Type promotion: which dtype an operation on mixed operands computes in.
//!
//! [`Policy`] is the seam: `promote_types`, `result_type` and `can_cast` behind a trait object, so
//! a tensor library can swap lattices. [`Torch`] reproduces PyTorch 2.15 exactly — its
//! `promoteTypes` table, the float8 and uint16/32/64 errors with torch's messages, and the
//! dim / zero-dim / wrapped-scalar precedence of `result_type`. [`Jax`] is jax 0.10's lattice,
//! where Python scalars are weak; [`NumPy`] is numpy 2.4's promotion and casting (NEP 50) with
//! ml_dtypes 0.7's dtypes; [`ArrayApi`] is the Python Array API standard's (2025.12), errors
//! included. `can_cast` takes NumPy's five [`Casting`] levels in every policy.
//!
//! ```
//! use dtcast_dtype::DType;
//! use dtcast_promote::{Operand, Policy, ScalarKind, Torch};
//!
//! let torch = Torch::default(); // default dtype float32
//! assert_eq!(torch.promote_types(DType::UInt8, DType::Int8)?, DType::Int16);
//!
//! // An int32 tensor plus the Python scalar 2.5 computes in the default dtype ...
//! let ops = [Operand::Tensor(DType::Int32), Operand::WrappedScalar(ScalarKind::Float)];
//! assert_eq!(torch.result_type(&ops)?, DType::Float32);
//! // ... while a 0-dim float64 tensor does not widen a float16 tensor.
//! let ops = [Operand::Tensor(DType::Float16), Operand::ZeroDim(DType::Float64)];
//! assert_eq!(torch.result_type(&ops)?, DType::Float16);
//!
//! assert!(torch.promote_types(DType::UInt16, DType::Int32).is_err());
//! assert!(!torch.can_cast(DType::Float32, DType::Int32));
//! # Ok::<(), dtcast_promote::PromoteError>(())
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod array_api;
mod casting;
mod error;
pub mod jax;
pub mod numpy;
mod operand;
mod policy;
mod state;
mod torch;

pub use array_api::ArrayApi;
pub use casting::{Casting, ParseCastingError};
pub use error::{ArrayApiRule, PromoteError};
pub use jax::Jax;
pub use numpy::NumPy;
pub use operand::{Operand, ScalarKind};
pub use policy::{at_least, Policy};
pub use state::ResultTypeState;
pub use torch::Torch;

pub use dtcast_dtype::DType;

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
