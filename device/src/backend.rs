//! The `Backend` and `Storage` traits: the seam between tensors and the memory of a device.

use std::any::Any;
use std::sync::Arc;

use dtcast_cast::CastMode;
use dtcast_dtype::DType;

use crate::error::TensorError;
use crate::Device;

/// A block of bytes on one device. Backends downcast the storages they own through `as_any`.
pub trait Storage: Send + Sync + core::fmt::Debug {
    /// Where the bytes live.
    fn device(&self) -> Device;
    /// How many bytes.
    fn len(&self) -> usize;
    /// `true` when empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// For the owning backend.
    fn as_any(&self) -> &dyn Any;
}

/// One device kind's memory operations. Implementers write the required methods; copying between
/// devices is provided (through host memory) and may be overridden.
pub trait Backend: Send + Sync + core::fmt::Debug {
    /// The device this backend serves.
    fn device(&self) -> Device;

    /// `bytes` zeroed bytes.
    fn allocate(&self, bytes: usize) -> Result<Arc<dyn Storage>, TensorError>;

    /// A new storage holding a copy of `host`.
    fn upload(&self, host: &[u8]) -> Result<Arc<dyn Storage>, TensorError>;

    /// [`upload`](Backend::upload), allowed to return before the copy is done when `non_blocking`
    /// (later operations on the storage, and reading it, wait for the copy).
    fn upload_with(
        &self,
        host: &[u8],
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        let _ = non_blocking;
        self.upload(host)
    }

    /// A new storage holding `host` (elements of `from`) cast to `to`: how a tensor moves to this
    /// device as a narrower dtype. The default casts on the host, then uploads; a backend may cast
    /// on the way (CUDA casts into its page-locked staging buffers).
    fn upload_cast(
        &self,
        host: &[u8],
        from: DType,
        to: DType,
        mode: CastMode,
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        if from == to {
            return self.upload_with(host, non_blocking);
        }
        let cast = dtcast_cast::cast_to_vec(host, from, to, mode)?;
        self.upload_with(&cast, non_blocking)
    }

    /// Copies `storage` (of this backend) into `host` (of the same length).
    fn download(&self, storage: &dyn Storage, host: &mut [u8]) -> Result<(), TensorError>;

    /// A new storage: `src` (of this backend, elements of `from`) cast to `to` on this device.
    /// With `from == to` it is a copy.
    fn cast(
        &self,
        src: &dyn Storage,
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<Arc<dyn Storage>, TensorError>;

    /// Waits for every queued operation of this backend.
    fn synchronize(&self) -> Result<(), TensorError>;

    /// A copy of `src` (of this backend) on `target`'s device. The default goes through host
    /// memory; `non_blocking` lets backends that can overlap transfers do so (reading the result
    /// waits for it).
    fn copy_to(
        &self,
        src: &dyn Storage,
        target: &dyn Backend,
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        let mut host = vec![0u8; src.len()];
        self.download(src, &mut host)?;
        target.upload_with(&host, non_blocking)
    }

    /// The bytes of `storage` as a new `Vec`.
    fn download_vec(&self, storage: &dyn Storage) -> Result<Vec<u8>, TensorError> {
        let mut host = vec![0u8; storage.len()];
        self.download(storage, &mut host)?;
        Ok(host)
    }
}
