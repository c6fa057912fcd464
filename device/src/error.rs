//! Errors of devices, backends and tensors.

use core::fmt;

use dtcast_bitcast::BitcastError;
use dtcast_cast::CastError;
use dtcast_dtype::{DType, ShapeError};
use dtcast_promote::PromoteError;
use dtcast_quant::QuantError;

use crate::device::ParseDeviceError;
use crate::Device;

/// Why a tensor or backend operation failed.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TensorError {
    /// A device string did not parse.
    Device(ParseDeviceError),
    /// A cast failed (Checked / Exact mode found an element; bad buffer lengths).
    Cast(CastError),
    /// A bitcast's shape rule refused.
    Bitcast(BitcastError),
    /// Promotion failed.
    Promote(PromoteError),
    /// A scaled format refused (its scheme, shape or buffers; see `dtcast_quant`).
    Quant(QuantError),
    /// A shape is too large: a dimension, its element count or its size in bytes is more than
    /// 2^63 - 1 (the one size rule, [`dtcast_dtype::MAX_SHAPE_SIZE`]).
    TooLarge(ShapeError),
    /// The data does not fill the shape.
    Shape {
        /// The shape asked for.
        shape: Vec<usize>,
        /// Elements the shape needs (`None` when it overflows).
        needed: Option<usize>,
        /// Elements given.
        given: usize,
    },
    /// A typed read asked for another element type than the tensor's dtype.
    DType {
        /// The tensor's dtype.
        actual: DType,
        /// The dtype of the Rust type asked for.
        requested: DType,
    },
    /// A `to(&str)` argument is neither a dtype nor a device.
    Target {
        /// The string.
        input: String,
        /// Why it is not a dtype.
        as_dtype: String,
        /// Why it is not a device.
        as_device: String,
    },
    /// The CUDA backend cannot be used on this machine (no feature, no driver, no GPU).
    CudaUnavailable(String),
    /// A CUDA call failed.
    Cuda(String),
    /// Memory for a tensor could not be allocated.
    OutOfMemory {
        /// The bytes asked for.
        bytes: usize,
    },
    /// A dtype the file format cannot store.
    Unstorable {
        /// The dtype.
        dtype: DType,
        /// The format (`safetensors`).
        format: &'static str,
    },
    /// Another library (candle, ndarray) refused, or handed over something dtcast cannot take.
    Interop {
        /// The library.
        library: &'static str,
        /// What went wrong, in that library's words where it gave some.
        message: String,
    },
    /// A storage was given to a backend of another device.
    WrongDevice {
        /// The backend's device.
        backend: Device,
        /// The storage's device.
        storage: Device,
    },
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TensorError::Device(e) => e.fmt(f),
            TensorError::Cast(e) => e.fmt(f),
            TensorError::Bitcast(e) => e.fmt(f),
            TensorError::Promote(e) => e.fmt(f),
            TensorError::Quant(e) => e.fmt(f),
            TensorError::TooLarge(e) => e.fmt(f),
            TensorError::Shape { shape, needed: Some(n), given } => {
                write!(f, "shape {shape:?} needs {n} elements but {given} were given")
            }
            TensorError::Shape { shape, needed: None, .. } => write!(f, "shape {shape:?} is too large"),
            TensorError::DType { actual, requested } => {
                write!(f, "the tensor holds {actual} elements, not {requested}; cast it first (`to({requested})`)")
            }
            TensorError::Target { input, as_dtype, as_device } => write!(
                f,
                "`{input}` is neither a dtype nor a device: as a dtype, {as_dtype}; as a device, {as_device}"
            ),
            TensorError::CudaUnavailable(why) => write!(f, "CUDA is not available: {why}"),
            TensorError::Cuda(e) => write!(f, "CUDA error: {e}"),
            TensorError::OutOfMemory { bytes } => write!(f, "out of memory: could not allocate {bytes} bytes"),
            TensorError::Unstorable { dtype, format } => {
                write!(f, "{format} cannot store {dtype} tensors")
            }
            TensorError::Interop { library, message } => write!(f, "{library}: {message}"),
            TensorError::WrongDevice { backend, storage } => {
                write!(f, "a {storage} storage was given to the {backend} backend")
            }
        }
    }
}

impl std::error::Error for TensorError {}

impl From<CastError> for TensorError {
    fn from(e: CastError) -> Self {
        TensorError::Cast(e)
    }
}

impl From<BitcastError> for TensorError {
    fn from(e: BitcastError) -> Self {
        TensorError::Bitcast(e)
    }
}

impl From<PromoteError> for TensorError {
    fn from(e: PromoteError) -> Self {
        TensorError::Promote(e)
    }
}

impl From<QuantError> for TensorError {
    fn from(e: QuantError) -> Self {
        TensorError::Quant(e)
    }
}

impl From<ParseDeviceError> for TensorError {
    fn from(e: ParseDeviceError) -> Self {
        TensorError::Device(e)
    }
}
