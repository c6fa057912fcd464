//! candle (feature `candle`): CPU `candle_core::Tensor`s cast by dtcast's kernels, and
//! conversions both ways.
//!
//! - [`to_dtype`]: a candle tensor cast with dtcast's SIMD, multi-threaded, torch-exact kernels
//!   (candle's own CPU casts are scalar, single-threaded, round some integer casts twice, and
//!   cannot cast float4, float6 or float8_e8m0); [`to_dtype_with`] in a chosen [`CastMode`].
//! - [`Tensor::from_candle`] / [`Tensor::to_candle`] (and `TryFrom` both ways): one copy of the
//!   bytes each.
//! - [`candle_dtype`] / [`dtype_of_candle`]: the dtypes both libraries have.
//!
//! ```
//! use candle_core::{Device, Tensor as CandleTensor};
//! use dtcast::prelude::*;
//!
//! let w = CandleTensor::new(&[[0.1f32, 300.0], [-2.5, 1e-3]], &Device::Cpu)?;
//! let b = dtcast::candle::to_dtype(&w, DType::BFloat16)?; // a candle tensor
//! assert_eq!(b.dtype(), candle_core::DType::BF16);
//! let t = Tensor::from_candle(&b)?; // a dtcast tensor
//! assert_eq!(t.to_vec::<bf16>()?[1], bf16::from_f32(300.0));
//! let back = t.to(DType::Float32)?.to_candle()?;
//! assert_eq!(back.dims(), [2, 2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`CastMode`]: crate::CastMode
//! [`Tensor::from_candle`]: crate::Tensor::from_candle
//! [`Tensor::to_candle`]: crate::Tensor::to_candle

/// The candle version dtcast converts to and from.
pub use candle_core;
pub use dtcast_device::{
    candle_dtype, candle_to_dtype as to_dtype, candle_to_dtype_with as to_dtype_with,
    dtype_of_candle,
};
