//! The CPU backend: host memory, casts by `dtcast-cast`.

use std::any::Any;
use std::sync::Arc;

use dtcast_cast::{cast_into_scratch, CastError, CastMode};
use dtcast_dtype::DType;

use crate::backend::{Backend, Storage};
use crate::error::TensorError;
use crate::Device;

/// Host memory, 16-byte aligned (so that every element type can be viewed in place).
#[derive(Debug)]
pub struct CpuStorage {
    words: Vec<u128>,
    len: usize,
}

impl CpuStorage {
    /// `len` zero bytes, or an error (not an abort) when the memory cannot be had.
    pub fn try_zeroed(len: usize) -> Result<CpuStorage, TensorError> {
        // Zeroed by the allocator (no pass of its own), large ones on huge pages: a fresh
        // tensor's first write is most of the cost of a cast into it.
        let words = dtcast_cast::zeroed_vec::<u128>(len.div_ceil(16))
            .ok_or(TensorError::OutOfMemory { bytes: len })?;
        Ok(CpuStorage { words, len })
    }

    /// `len` zero bytes.
    ///
    /// # Panics
    /// If the memory cannot be allocated (use [`CpuStorage::try_zeroed`] to get an error instead).
    pub fn zeroed(len: usize) -> CpuStorage {
        match CpuStorage::try_zeroed(len) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> CpuStorage {
        let mut s = CpuStorage::zeroed(bytes.len());
        s.bytes_mut().copy_from_slice(bytes);
        s
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut bytemuck::cast_slice_mut(&mut self.words)[..len]
    }
}

impl Storage for CpuStorage {
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The CPU backend.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

/// The bytes of a CPU storage, or an error naming the storage's device.
pub(crate) fn host_bytes(storage: &dyn Storage) -> Result<&[u8], TensorError> {
    storage
        .as_any()
        .downcast_ref::<CpuStorage>()
        .map(CpuStorage::bytes)
        .ok_or(TensorError::WrongDevice {
            backend: Device::Cpu,
            storage: storage.device(),
        })
}

impl Backend for Cpu {
    fn device(&self) -> Device {
        Device::Cpu
    }

    fn allocate(&self, bytes: usize) -> Result<Arc<dyn Storage>, TensorError> {
        Ok(Arc::new(CpuStorage::try_zeroed(bytes)?))
    }

    fn upload(&self, host: &[u8]) -> Result<Arc<dyn Storage>, TensorError> {
        let mut s = CpuStorage::try_zeroed(host.len())?;
        s.bytes_mut().copy_from_slice(host);
        Ok(Arc::new(s))
    }

    fn download(&self, storage: &dyn Storage, host: &mut [u8]) -> Result<(), TensorError> {
        let bytes = host_bytes(storage)?;
        if bytes.len() != host.len() {
            return Err(TensorError::Shape {
                shape: vec![host.len()],
                needed: Some(host.len()),
                given: bytes.len(),
            });
        }
        host.copy_from_slice(bytes);
        Ok(())
    }

    fn cast(
        &self,
        src: &dyn Storage,
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        let bytes = host_bytes(src)?;
        let n = from
            .elements_in(bytes.len())
            .ok_or(CastError::PartialElement {
                dtype: from,
                len: bytes.len(),
            })?;
        let len = to.storage_bytes(n).map_err(|_| CastError::NotByteAligned {
            dtype: to,
            elements: n,
        })?;
        let mut out = CpuStorage::try_zeroed(len)?;
        // A new buffer, dropped on error: Checked and Exact check and convert in one pass.
        cast_into_scratch(bytes, from, out.bytes_mut(), to, mode)?;
        Ok(Arc::new(out))
    }

    fn synchronize(&self) -> Result<(), TensorError> {
        Ok(())
    }

    /// Straight from this storage's bytes (no intermediate copy).
    fn copy_to(
        &self,
        src: &dyn Storage,
        target: &dyn Backend,
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        target.upload_with(host_bytes(src)?, non_blocking)
    }
}
