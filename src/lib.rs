//! dtcast: PyTorch's dtype semantics without libtorch.
//!
//! This facade re-exports the workspace's crates, each usable on its own:
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`dtype`] | `dtcast-dtype` | the 35 dtypes, names, sizes in bits, float formats, [`Element`] |
//! | [`promote`] | `dtcast-promote` | [`Policy`], [`Torch`]: `promote_types`, `result_type`, `can_cast` |
//! | [`bitcast`] | `dtcast-bitcast` | bitcast shape rules ([`Xla`], [`View`]) and zero-copy reinterpretation |
//! | [`cast`] | `dtcast-cast` | value casts between every pair of dtypes |
//! | [`quant`] | `dtcast-quant` | scaled formats (FP8 with scales, MXFP8, MXFP4, NVFP4): dequantization |
//! | [`device`] | `dtcast-device` | devices, backends and `Tensor::to` |
//! | [`layer`] | `dtcast-layer` | model traversal, `Layer::astype`, checkpoints |
//!
//! and holds the `dtcast` command-line tool ([`cli`]).
//!
//! ```
//! use dtcast::{DType, Operand, Policy, ScalarKind, Torch};
//! let torch = Torch::default();
//! let ops = [Operand::Tensor(DType::BFloat16), Operand::WrappedScalar(ScalarKind::Complex)];
//! assert_eq!(torch.result_type(&ops)?, DType::BComplex32);
//! # Ok::<(), dtcast::promote::PromoteError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// Lets `#[derive(Layer)]` name the facade `::dtcast` from inside it too (examples, doctests).
extern crate self as dtcast;

pub mod cli;

#[doc(inline)]
pub use dtcast_bitcast as bitcast;
#[doc(inline)]
pub use dtcast_cast as cast;
#[doc(inline)]
pub use dtcast_device as device;
#[doc(inline)]
pub use dtcast_dtype as dtype;
#[doc(inline)]
pub use dtcast_layer as layer;
#[doc(inline)]
pub use dtcast_promote as promote;
#[doc(inline)]
pub use dtcast_quant as quant;

pub use dtcast_bitcast::{Rule, View, Xla};
pub use dtcast_cast::CastMode;
pub use dtcast_device::{Device, Tensor, TensorError, ToOptions};
pub use dtcast_dtype::{Category, DType, Element};
/// The `Layer` trait and `#[derive(Layer)]`.
pub use dtcast_layer::Layer;
pub use dtcast_layer::LayerError;
pub use dtcast_promote::{Operand, Policy, ScalarKind, Torch};

/// The README's Rust examples, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
