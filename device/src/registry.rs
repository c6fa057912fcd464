//! Which backend serves which device.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

use crate::backend::Backend;
use crate::cpu::Cpu;
use crate::error::TensorError;
use crate::Device;

/// The backend of `device`: the CPU backend, or the CUDA backend of that ordinal (created on first
/// use and shared afterwards). Without the `cuda` feature, or without a driver or GPU, a CUDA device
/// gives `TensorError::CudaUnavailable` with the reason.
///
/// ```
/// use dtcast_device::{backend_for, Device};
/// assert_eq!(backend_for(Device::Cpu)?.device(), Device::Cpu);
/// # Ok::<(), dtcast_device::TensorError>(())
/// ```
pub fn backend_for(device: Device) -> Result<Arc<dyn Backend>, TensorError> {
    match resolve_device(device) {
        Device::Cuda(ordinal) => cuda_backend(ordinal),
        Device::Cpu | Device::CpuIndexed(_) | Device::CudaCurrent => {
            static CPU: OnceLock<Arc<dyn Backend>> = OnceLock::new();
            Ok(Arc::clone(CPU.get_or_init(|| Arc::new(Cpu))))
        }
    }
}

/// The current CUDA device's ordinal (what `cuda` without an index means); process-wide
/// (torch's is per thread).
static CURRENT_CUDA: AtomicU8 = AtomicU8::new(0);

/// Chooses the CUDA device that `cuda` without an index resolves to (torch's
/// `torch.cuda.set_device`), for the whole process. An ordinal the machine lacks is refused
/// when the device is used, as in torch.
///
/// ```
/// use dtcast_device::{current_cuda_device, resolve_device, set_current_cuda_device, Device};
/// assert_eq!(resolve_device(Device::CudaCurrent), Device::Cuda(current_cuda_device()));
/// ```
pub fn set_current_cuda_device(ordinal: u8) {
    CURRENT_CUDA.store(ordinal, Ordering::Relaxed);
}

/// The ordinal that `cuda` without an index resolves to: 0 unless [`set_current_cuda_device`]
/// chose another.
pub fn current_cuda_device() -> u8 {
    CURRENT_CUDA.load(Ordering::Relaxed)
}

/// The device a tensor placed on `device` lives on: `cuda` becomes `cuda:N` for the current
/// device, `cpu:N` becomes `cpu` (every index names the same host memory); others are kept.
///
/// ```
/// use dtcast_device::{resolve_device, Device};
/// assert_eq!(resolve_device(Device::CpuIndexed(0)), Device::Cpu);
/// assert_eq!(resolve_device(Device::Cuda(3)), Device::Cuda(3));
/// ```
pub fn resolve_device(device: Device) -> Device {
    match device {
        Device::CudaCurrent => Device::Cuda(current_cuda_device()),
        Device::Cpu | Device::CpuIndexed(_) => Device::Cpu,
        Device::Cuda(n) => Device::Cuda(n),
    }
}

#[cfg(feature = "cuda")]
fn cuda_backend(ordinal: u8) -> Result<Arc<dyn Backend>, TensorError> {
    crate::cuda::backend(ordinal)
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend(_ordinal: u8) -> Result<Arc<dyn Backend>, TensorError> {
    Err(TensorError::CudaUnavailable(
        "dtcast was built without its `cuda` feature".to_owned(),
    ))
}

/// How many CUDA devices this machine has (0 without the `cuda` feature, a driver or a GPU).
pub fn cuda_device_count() -> usize {
    #[cfg(feature = "cuda")]
    {
        crate::cuda::device_count()
    }
    #[cfg(not(feature = "cuda"))]
    {
        0
    }
}

/// `true` if this machine has a usable CUDA device 0 (driver library present and at least one
/// GPU). Always `false` without the `cuda` feature.
///
/// ```
/// use dtcast_device::{cuda_available, cuda_device_count};
/// assert_eq!(cuda_available(), cuda_device_count() > 0);
/// ```
pub fn cuda_available() -> bool {
    cuda_device_count() > 0
}

/// One line per backend: `cpu`, and `cuda:N (name, memory)` for each GPU — or, where CUDA cannot
/// be used, `cuda: not available (why)`.
pub fn describe_backends() -> Vec<String> {
    let cpu = vec!["cpu".to_owned()];
    #[cfg(feature = "cuda")]
    let cpu = cpu.into_iter().chain(crate::cuda::describe()).collect();
    #[cfg(not(feature = "cuda"))]
    let cpu = cpu
        .into_iter()
        .chain(["cuda: not available (built without the `cuda` feature)".to_owned()])
        .collect();
    cpu
}
