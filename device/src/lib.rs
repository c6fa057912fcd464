//! Devices, backends and `Tensor::to`.
//!
//! - [`Device`]: `cpu` or `cuda:N` (and torch's `cuda`, `cpu:N`), parsed and printed with torch's
//!   grammar (and Paddle's `gpu:N`).
//! - [`Backend`] / [`Storage`]: a device's memory operations behind trait objects. [`Cpu`] uses
//!   `dtcast-cast`; the CUDA backend (feature `cuda`, on by default) uses cudarc with libcuda and
//!   NVRTC loaded at run time, and kernels that give the same bytes as the CPU.
//! - [`Tensor`]: dtype, contiguous shape, and an `Arc<dyn Storage>`; [`Tensor::to`] converts dtype
//!   and/or device, sharing the storage when nothing changes.
//!
//! ```
//! use dtcast_device::{Device, Tensor};
//! use dtcast_dtype::DType;
//! let t = Tensor::from_vec(vec![0.1f32, 1e5], &[2])?;
//! let h = t.to(DType::Float16)?;
//! assert_eq!(h.dtype(), DType::Float16);
//! assert_eq!(h.device(), Device::Cpu);
//! # Ok::<(), dtcast_device::TensorError>(())
//! ```
#![deny(missing_docs)]

mod backend;
#[cfg(feature = "candle")]
mod candle_interop;
mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod device;
mod error;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
mod promote_ops;
mod registry;
#[cfg(feature = "safetensors")]
mod safetensors_view;
mod tensor;

pub use backend::{Backend, Storage};
#[cfg(feature = "candle")]
pub use candle_interop::{candle_dtype, candle_to_dtype, candle_to_dtype_with, dtype_of_candle};
pub use cpu::{Cpu, CpuStorage};
pub use device::{Device, ParseDeviceError, MAX_ORDINAL};
pub use error::TensorError;
pub use promote_ops::{promote_operands, Arg};
pub use registry::{
    backend_for, cuda_available, cuda_device_count, current_cuda_device, describe_backends,
    resolve_device, set_current_cuda_device,
};
#[cfg(feature = "safetensors")]
pub use safetensors_view::SafetensorsView;
pub use tensor::{IntoTarget, Target, Tensor, ToOptions};

pub use dtcast_cast::CastMode;

/// The README's examples, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
