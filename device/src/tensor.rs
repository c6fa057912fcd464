//! `Tensor`: a dtype, a contiguous shape, and bytes on a device; `Tensor::to`.

use std::sync::Arc;

use dtcast_bitcast::{numel, Rule};
use dtcast_cast::CastMode;
use dtcast_dtype::{DType, Element};

use crate::backend::Storage;
use crate::error::TensorError;
use crate::registry::backend_for;
use crate::Device;

/// A contiguous, row-major tensor: its bytes live on one device behind a shared storage, so
/// clones and no-op conversions share them.
///
/// ```
/// use dtcast_device::{cuda_available, Device, Tensor, ToOptions};
/// use dtcast_dtype::DType;
/// let t = Tensor::from_vec(vec![1.0f32, 2.5, -3.0, 300.0], &[2, 2])?;
/// assert!(t.to(DType::Float32)?.shares_storage(&t));
/// let c = t.to_with(DType::Float32, ToOptions { copy: true, ..Default::default() })?;
/// assert!(!c.shares_storage(&t));
/// let u: Vec<u8> = t.to(DType::UInt8)?.to_vec::<u8>()?; // [1, 2, 253, 44], as torch
/// assert_eq!(u, [1, 2, 253, 44]);
/// let both = t.to((Device::Cpu, DType::Int32))?;
/// let like = t.to(&both)?;
/// assert_eq!(like.dtype(), DType::Int32);
/// let s = t.to("float64")?;
/// assert_eq!(s.dtype(), DType::Float64);
/// assert!(t.to("cuda:0").is_err() || cuda_available());
/// # Ok::<(), dtcast_device::TensorError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Tensor {
    storage: Arc<dyn Storage>,
    dtype: DType,
    shape: Vec<usize>,
}

/// Options of [`Tensor::to_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToOptions {
    /// Let host↔device transfers run asynchronously (CUDA: a stream and pinned staging buffers).
    /// Reading the result waits for it.
    pub non_blocking: bool,
    /// Always return a new storage, even when nothing changes.
    pub copy: bool,
    /// How values that do not fit are treated.
    pub mode: CastMode,
}

/// What [`Tensor::to`] converts to: a dtype, a device, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// The device, if it changes.
    pub device: Option<Device>,
    /// The dtype, if it changes.
    pub dtype: Option<DType>,
}

/// Anything [`Tensor::to`] accepts: a `DType`, a `Device`, `(Device, DType)`, `&Tensor` (its
/// device and dtype), or a `&str` (a dtype name, else a device string).
pub trait IntoTarget {
    /// The target, or why the argument names none.
    fn into_target(self) -> Result<Target, TensorError>;
}

impl IntoTarget for DType {
    fn into_target(self) -> Result<Target, TensorError> {
        Ok(Target {
            device: None,
            dtype: Some(self),
        })
    }
}

impl IntoTarget for Device {
    fn into_target(self) -> Result<Target, TensorError> {
        Ok(Target {
            device: Some(self),
            dtype: None,
        })
    }
}

impl IntoTarget for (Device, DType) {
    fn into_target(self) -> Result<Target, TensorError> {
        Ok(Target {
            device: Some(self.0),
            dtype: Some(self.1),
        })
    }
}

impl IntoTarget for &Tensor {
    fn into_target(self) -> Result<Target, TensorError> {
        Ok(Target {
            device: Some(self.device()),
            dtype: Some(self.dtype),
        })
    }
}

impl IntoTarget for Target {
    fn into_target(self) -> Result<Target, TensorError> {
        Ok(self)
    }
}

impl IntoTarget for &str {
    /// A dtype name (`float16`, `bf16`, `torch.half`) first, then a device string (`cuda:0`).
    /// Unlike torch (whose string argument is always a device), both readings are tried; an error
    /// says why each failed.
    fn into_target(self) -> Result<Target, TensorError> {
        match self.parse::<DType>() {
            Ok(dtype) => Ok(Target {
                device: None,
                dtype: Some(dtype),
            }),
            Err(dtype_err) => match self.parse::<Device>() {
                Ok(device) => Ok(Target {
                    device: Some(device),
                    dtype: None,
                }),
                Err(device_err) => Err(TensorError::Target {
                    input: self.to_owned(),
                    as_dtype: match dtype_err.suggestion() {
                        Some(s) => format!("it is unknown (did you mean `{s}`?)"),
                        None => "it is unknown".to_owned(),
                    },
                    as_device: device_err.to_string(),
                }),
            },
        }
    }
}

impl IntoTarget for &String {
    fn into_target(self) -> Result<Target, TensorError> {
        self.as_str().into_target()
    }
}

/// `shape` holds `given` elements of `dtype`, within the size rule for shapes.
fn check_numel(shape: &[usize], dtype: DType, given: usize) -> Result<(), TensorError> {
    dtype.shape_elements(shape).map_err(TensorError::TooLarge)?;
    match numel(shape) {
        Some(n) if n == given => Ok(()),
        needed => Err(TensorError::Shape {
            shape: shape.to_vec(),
            needed,
            given,
        }),
    }
}

impl Tensor {
    /// A CPU tensor owning `data`, of shape `shape` (whose element count must be `data.len()`).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor, TensorError> {
        Tensor::from_slice(&data, shape)
    }

    /// A CPU tensor holding a copy of `data`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor, TensorError> {
        check_numel(shape, T::DTYPE, data.len())?;
        Tensor::from_bytes(bytemuck::cast_slice(data), T::DTYPE, shape)
    }

    /// A CPU tensor from little-endian element bytes.
    pub fn from_bytes(bytes: &[u8], dtype: DType, shape: &[usize]) -> Result<Tensor, TensorError> {
        let n = elements(dtype, bytes.len())?;
        check_numel(shape, dtype, n)?;
        let storage = backend_for(Device::Cpu)?.upload(bytes)?;
        Ok(Tensor {
            storage,
            dtype,
            shape: shape.to_vec(),
        })
    }

    /// A tensor of zeros on `device`.
    pub fn zeros(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor, TensorError> {
        let n = dtype.shape_elements(shape).map_err(TensorError::TooLarge)?;
        let bytes = dtype.storage_bytes(n).map_err(|_| {
            TensorError::Cast(dtcast_cast::CastError::NotByteAligned { dtype, elements: n })
        })?;
        let storage = backend_for(device)?.allocate(bytes)?;
        Ok(Tensor {
            storage,
            dtype,
            shape: shape.to_vec(),
        })
    }

    /// A tensor over an existing storage (a backend's output, say).
    pub fn from_storage(
        storage: Arc<dyn Storage>,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor, TensorError> {
        let n = elements(dtype, storage.len())?;
        check_numel(shape, dtype, n)?;
        Ok(Tensor {
            storage,
            dtype,
            shape: shape.to_vec(),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape (row-major, contiguous).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Where the bytes live.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        // Checked when the tensor was made.
        self.dtype.elements_in(self.storage.len()).unwrap_or(0)
    }

    /// The storage (shared between tensors that alias).
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// `true` if both tensors use the very same storage (no copy was made between them).
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }

    /// The little-endian bytes, copied to host memory (waits for pending work on the device).
    pub fn to_bytes(&self) -> Result<Vec<u8>, TensorError> {
        backend_for(self.device())?.download_vec(self.storage.as_ref())
    }

    /// The elements as a `Vec<T>`; `T` must be the tensor's dtype (an error otherwise — cast
    /// first with `to`).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, TensorError> {
        if T::DTYPE != self.dtype {
            return Err(TensorError::DType {
                actual: self.dtype,
                requested: T::DTYPE,
            });
        }
        // A CPU tensor's bytes are read in place (one copy, into the result).
        if let Ok(bytes) = crate::cpu::host_bytes(self.storage.as_ref()) {
            return Ok(dtcast_bitcast::reinterpret::<T>(bytes)?.into_owned());
        }
        let bytes = self.to_bytes()?;
        Ok(dtcast_bitcast::reinterpret::<T>(&bytes)?.into_owned())
    }

    /// Converts to a dtype and/or device (see [`IntoTarget`]); when nothing changes the result
    /// shares this tensor's storage, as torch's `to` returns `self`.
    pub fn to(&self, target: impl IntoTarget) -> Result<Tensor, TensorError> {
        self.to_with(target, ToOptions::default())
    }

    /// [`Tensor::to`] with options.
    ///
    /// A move between devices with a dtype change casts on the side that moves fewer bytes over
    /// the bus: before the copy when the dtype narrows, after it when it widens.
    pub fn to_with(
        &self,
        target: impl IntoTarget,
        options: ToOptions,
    ) -> Result<Tensor, TensorError> {
        let target = target.into_target()?;
        let (from_dev, from_dt) = (self.device(), self.dtype);
        // `cuda` means the current device, `cpu:N` the host: compared as the tensor's device is.
        let to_dev = target
            .device
            .map_or(from_dev, crate::registry::resolve_device);
        let to_dt = target.dtype.unwrap_or(from_dt);
        if to_dev == from_dev && to_dt == from_dt && !options.copy {
            return Ok(self.clone());
        }
        let src = backend_for(from_dev)?;
        let storage = if to_dev == from_dev {
            src.cast(self.storage.as_ref(), from_dt, to_dt, options.mode)?
        } else {
            let dst = backend_for(to_dev)?;
            if to_dt.bits() < from_dt.bits() && from_dev.is_cpu() {
                // The target backend casts the host bytes on their way over.
                let host = crate::cpu::host_bytes(self.storage.as_ref())?;
                dst.upload_cast(host, from_dt, to_dt, options.mode, options.non_blocking)?
            } else if to_dt.bits() < from_dt.bits() {
                let narrowed = src.cast(self.storage.as_ref(), from_dt, to_dt, options.mode)?;
                src.copy_to(narrowed.as_ref(), dst.as_ref(), options.non_blocking)?
            } else {
                let moved =
                    src.copy_to(self.storage.as_ref(), dst.as_ref(), options.non_blocking)?;
                if to_dt == from_dt {
                    moved
                } else {
                    dst.cast(moved.as_ref(), from_dt, to_dt, options.mode)?
                }
            }
        };
        Ok(Tensor {
            storage,
            dtype: to_dt,
            shape: self.shape.clone(),
        })
    }

    /// The same bytes read as `dtype`, with the shape `rule` gives (zero-copy: the result shares
    /// this tensor's storage).
    ///
    /// ```
    /// use dtcast_bitcast::View;
    /// use dtcast_device::Tensor;
    /// use dtcast_dtype::DType;
    /// let t = Tensor::from_vec(vec![1.0f32; 6], &[2, 3])?;
    /// let b = t.bitcast(DType::UInt8, &View)?;
    /// assert_eq!(b.shape(), &[2, 12]);
    /// assert!(b.shares_storage(&t));
    /// # Ok::<(), dtcast_device::TensorError>(())
    /// ```
    pub fn bitcast(&self, dtype: DType, rule: &dyn Rule) -> Result<Tensor, TensorError> {
        let shape = rule.infer(&self.shape, self.dtype, dtype)?;
        Ok(Tensor {
            storage: Arc::clone(&self.storage),
            dtype,
            shape,
        })
    }
}

/// The elements of `dtype` in `len` bytes, or the error for a length that holds no whole number.
fn elements(dtype: DType, len: usize) -> Result<usize, TensorError> {
    dtype
        .elements_in(len)
        .ok_or(TensorError::Cast(dtcast_cast::CastError::PartialElement {
            dtype,
            len,
        }))
}
