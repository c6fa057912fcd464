//! dtcast: PyTorch's dtype semantics without libtorch.
//!
//! This facade re-exports the workspace's crates, each usable on its own:
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`dtype`] | `dtcast-dtype` | the 35 dtypes, names, sizes in bits, float formats, [`Element`] |
//! | [`promote`] | `dtcast-promote` | [`Policy`], [`Torch`], `Jax`, `NumPy`: `promote_types`, `result_type`, `can_cast` |
//! | [`bitcast`] | `dtcast-bitcast` | bitcast shape rules ([`Xla`], [`View`]) and zero-copy reinterpretation |
//! | [`cast`](mod@cast) | `dtcast-cast` | value casts between every pair of dtypes |
//! | [`quant`] | `dtcast-quant` | scaled formats (FP8 with scales, MXFP8, MXFP4, NVFP4): quantization and dequantization |
//! | [`device`] | `dtcast-device` | devices, backends and `Tensor::to` |
//! | [`layer`] | `dtcast-layer` | model traversal, `Layer::astype`, checkpoints |
//!
//! and holds the `dtcast` command-line tool ([`cli`]). [`prelude`] has what most programs need;
//! [`Error`] takes every crate's error.
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

#[cfg(feature = "candle")]
pub mod candle;
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

mod error;
pub use error::Error;

pub use dtcast_bitcast::{Rule, View, Xla};
pub use dtcast_cast::{cast, cast_slice, cast_to_vec, CastMode};
pub use dtcast_device::{Device, Tensor, TensorError, ToOptions};
pub use dtcast_dtype::{Category, DType, Element};
/// The `Layer` trait and `#[derive(Layer)]`.
pub use dtcast_layer::Layer;
pub use dtcast_layer::LayerError;
pub use dtcast_layer::{IncompatibleKeys, LoadOptions, StateDict};
pub use dtcast_promote::{Operand, Policy, ScalarKind, Torch};

/// What most programs need, in one `use dtcast::prelude::*;`: the dtype, tensor, device and layer
/// types (with `#[derive(Layer)]`), cast modes, torch's promotion, the element types (`f16`,
/// `bf16`, `Complex`, the float8 types) and [`crate::Error`].
///
/// ```
/// use dtcast::prelude::*;
///
/// #[derive(Layer)]
/// struct Mlp {
///     #[layer] up: Linear,
///     #[buffer] #[keep_dtype] scale: Tensor,
/// }
///
/// let mut m = Mlp {
///     up: Linear::new(Tensor::from_vec(vec![0.5f32; 4], &[2, 2])?, None),
///     scale: Tensor::from_vec(vec![2.0f32], &[1])?,
/// };
/// m.astype(DType::BFloat16)?;
/// assert_eq!(m.state_dict()["up.weight"].dtype(), DType::BFloat16);
/// assert_eq!(m.state_dict()["scale"].dtype(), DType::Float32);
/// let promoted = Torch::default().promote_types(DType::BFloat16, DType::Float16)?;
/// assert_eq!(promoted, DType::Float32);
/// # Ok::<(), dtcast::Error>(())
/// ```
pub mod prelude {
    pub use crate::Error;
    pub use dtcast_cast::CastMode;
    pub use dtcast_device::{Device, Tensor};
    pub use dtcast_dtype::half::{bf16, f16};
    pub use dtcast_dtype::num_complex::Complex;
    pub use dtcast_dtype::{
        DType, Element, Float4E2M1FnX2, Float8E3M4, Float8E4M3, Float8E4M3B11Fnuz, Float8E4M3Fn,
        Float8E4M3Fnuz, Float8E5M2, Float8E5M2Fnuz, Float8E5M3Fnu, Float8E8M0Fnu,
    };
    pub use dtcast_layer::{Embedding, Layer, LayerNorm, Linear, LoadOptions, Sequential};
    pub use dtcast_promote::{Operand, Policy, ScalarKind, Torch};
}

/// The README's Rust examples, compiled and run as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
