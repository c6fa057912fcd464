//! Layers: named traversal of a model's tensors, all-or-nothing `astype` / `to`, and
//! safetensors checkpoints.
//!
//! [`Layer`] has two required methods — show your tensors to a [`Visitor`], let a [`VisitorMut`]
//! replace them — and `#[derive(Layer)]` writes both. Everything else is written once on top:
//! `named_parameters`, `named_buffers`, `named_tensors` (PyTorch's names and order), `astype`,
//! `astype_all`, `to`, `load_tensors`.
//!
//! ```
//! use dtcast::Layer;
//! use dtcast::Tensor;
//! use dtcast::DType;
//!
//! #[derive(Layer)]
//! struct Block {
//!     #[param] weight: Tensor,
//!     #[buffer] steps: Tensor,
//!     #[buffer] #[keep_dtype] scale: Tensor,
//! }
//!
//! let mut b = Block {
//!     weight: Tensor::from_vec(vec![1.0f32, 2.0], &[2])?,
//!     steps: Tensor::from_vec(vec![7i64], &[1])?,
//!     scale: Tensor::from_vec(vec![0.5f32], &[1])?,
//! };
//! b.astype(DType::BFloat16)?;
//! let dtypes: Vec<DType> = b.named_tensors().iter().map(|(_, t)| t.dtype()).collect();
//! assert_eq!(dtypes, [DType::BFloat16, DType::Int64, DType::Float32]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

// Lets `#[derive(Layer)]` name this crate `::dtcast_layer` from inside it too.
extern crate self as dtcast_layer;

pub mod checkpoint;
mod error;
pub mod gguf;
pub mod input;
mod layer;
mod modules;
pub mod output;
mod state;
pub mod text;
mod visit;

pub use dtcast_layer_derive::Layer;
pub use error::LayerError;
pub use layer::{Layer, NamedTensor};
pub use modules::{Embedding, LayerNorm, Linear, Sequential};
pub use state::{IncompatibleKeys, LoadOptions, StateDict, TensorSource};
pub use visit::{Path, TensorField, TensorKind, Visitor, VisitorMut};

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
