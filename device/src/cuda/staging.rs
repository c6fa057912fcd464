//! Host ↔ device transfers through page-locked buffers that the backend keeps.
//!
//! The bus reads and writes page-locked memory several times faster than ordinary (pageable)
//! memory, whose copies the driver stages itself, a piece at a time; but allocating page-locked
//! memory is slower still than the transfer, so a transfer must not allocate its own. A
//! transfer here cycles through `BUFFERS` buffers of `CHUNK` bytes, kept by the backend: while
//! the bus moves one chunk, the host threads fill the next (a copy — or, moving a tensor to the
//! device as a narrower dtype, the CPU cast itself, so the cast output never exists in pageable
//! memory) or empty the previous one. Each buffer carries an event recorded after its last
//! transfer; it is written again only once that event has passed.

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};
use dtcast_cast::{cast, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

use super::{cuda_error, Cuda};
use crate::error::TensorError;

/// Bytes per staging buffer.
const CHUNK: usize = 16 << 20;
/// Staging buffers a transfer cycles through.
const BUFFERS: usize = 3;
/// Transfers below this size go straight from or to pageable memory (the driver's own staging is
/// as quick there, and nothing page-locked is allocated for a small tensor).
pub(super) const STAGED_BYTES: usize = 1 << 20;

/// One page-locked buffer and the event after its last transfer.
pub(super) struct Buffer {
    host: PinnedHostSlice<u8>,
    free: CudaEvent,
}

/// Copies `src` into `dst` (same length) on the rayon pool, a MiB per task.
fn parallel_copy(src: &[u8], dst: &mut [u8]) {
    dst.par_chunks_mut(1 << 20)
        .zip(src.par_chunks(1 << 20))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

impl Cuda {
    /// The backend's staging buffers (allocated on first use), taken for one transfer.
    fn take_staging(&self) -> Result<Vec<Buffer>, TensorError> {
        let mut kept = std::mem::take(
            &mut *self
                .staging
                .lock()
                .map_err(|_| TensorError::Cuda("staging buffers poisoned".to_owned()))?,
        );
        while kept.len() < BUFFERS {
            // SAFETY: a staging buffer is written (by the host or by a transfer) before it is read.
            let host =
                unsafe { self.ctx.alloc_pinned_with_flags::<u8>(CHUNK, 0) }.map_err(cuda_error)?;
            let free = self
                .ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(cuda_error)?;
            kept.push(Buffer { host, free });
        }
        Ok(kept)
    }

    /// Gives buffers back for the next transfer (a concurrent transfer that took none meanwhile
    /// allocated its own; the extra ones are freed, once their last transfer is done).
    fn keep_staging(&self, buffers: Vec<Buffer>) {
        let extra = match self.staging.lock() {
            Ok(mut kept) if kept.is_empty() => {
                *kept = buffers;
                return;
            }
            _ => buffers,
        };
        for b in extra {
            // A transfer may still read or fill it: page-locked memory is freed only after.
            let _ = b.free.synchronize();
        }
    }

    /// `host` (elements of `from`) in new device memory as elements of `to`: cast (or copied) on
    /// the host into the staging buffers chunk by chunk, each chunk sent while the next is made.
    /// Returns once the last chunk is queued; later work on the stream runs after it.
    pub(super) fn upload_staged(
        &self,
        host: &[u8],
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<CudaSlice<u8>, TensorError> {
        // Bits per element, and byte offsets at element counts that are multiples of 8 (or the
        // end, which the caller has checked ends on a byte): exact for packed dtypes too.
        let (fb, tb) = (from.bits(), to.bits());
        let n = host.len() * 8 / fb;
        let mut dst = self.alloc_for_writing(n * tb / 8)?;
        let mut buffers = self.take_staging()?;
        let per_chunk = CHUNK * 8 / fb.max(tb) / 8 * 8;
        let mut sent = || -> Result<(), TensorError> {
            for (k, first) in (0..n).step_by(per_chunk).enumerate() {
                let end = (first + per_chunk).min(n);
                let b = &mut buffers[k % BUFFERS];
                b.free.synchronize().map_err(cuda_error)?;
                let stage =
                    &mut b.host.as_mut_slice().map_err(cuda_error)?[..(end - first) * tb / 8];
                let part = &host[first * fb / 8..end * fb / 8];
                if from == to {
                    parallel_copy(part, stage);
                } else {
                    cast(part, from, stage, to, mode).map_err(|e| e.offset_by(first))?;
                }
                let mut view = dst.slice_mut(first * tb / 8..end * tb / 8);
                // `stage` is page-locked: the copy is asynchronous; `free` marks its end.
                self.stream
                    .memcpy_htod(&*stage, &mut view)
                    .map_err(cuda_error)?;
                b.free.record(&self.stream).map_err(cuda_error)?;
            }
            Ok(())
        };
        let result = sent();
        self.keep_staging(buffers);
        result.map(|()| dst)
    }

    /// The first `host.len()` bytes of `src` into `host`, through the staging buffers: the bus
    /// fills one buffer while the host threads empty another. Returns when every byte is in `host`.
    pub(super) fn download_staged(
        &self,
        src: &CudaSlice<u8>,
        host: &mut [u8],
    ) -> Result<(), TensorError> {
        let len = host.len();
        let mut buffers = self.take_staging()?;
        let chunks: Vec<(usize, usize)> = (0..len)
            .step_by(CHUNK)
            .map(|first| (first, (first + CHUNK).min(len)))
            .collect();
        let mut received = || -> Result<(), TensorError> {
            let queue = |k: usize, buffers: &mut Vec<Buffer>| -> Result<(), TensorError> {
                let (first, end) = chunks[k];
                let b = &mut buffers[k % BUFFERS];
                let stage = &mut b.host.as_mut_slice().map_err(cuda_error)?[..end - first];
                self.stream
                    .memcpy_dtoh(&src.slice(first..end), stage)
                    .map_err(cuda_error)?;
                b.free.record(&self.stream).map_err(cuda_error)
            };
            for k in 0..chunks.len().min(BUFFERS) {
                queue(k, &mut buffers)?;
            }
            for k in 0..chunks.len() {
                let (first, end) = chunks[k];
                {
                    let b = &mut buffers[k % BUFFERS];
                    b.free.synchronize().map_err(cuda_error)?;
                    let stage = &b.host.as_mut_slice().map_err(cuda_error)?[..end - first];
                    parallel_copy(stage, &mut host[first..end]);
                }
                if k + BUFFERS < chunks.len() {
                    queue(k + BUFFERS, &mut buffers)?;
                }
            }
            Ok(())
        };
        let result = received();
        self.keep_staging(buffers);
        result
    }
}
