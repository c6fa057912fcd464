//! Measurements on a CUDA device, for `dtcast bench --device cuda:N`: a cast kernel beside a
//! device-to-device copy of as many bytes, host ↔ device transfers pinned against pageable, and
//! (`--scheme`) the scaled formats' quantize and dequantize beside copies of their bytes.
//!
//! Every figure is the median of `repeat` rounds, and each round runs every variant once, one after
//! the other, so that a slow spell of a shared machine hits all of them alike.

use std::time::{Duration, Instant};

use cudarc::driver::sys::CUevent_flags;
use dtcast_cast::CastMode;
use dtcast_dtype::DType;
use dtcast_quant::Scheme;

use super::{backend_of, cuda_error, dequantize, quantize, DeviceQuantized};
use crate::backend::Backend;
use crate::error::TensorError;
use crate::{Device, Tensor};

/// What one cast costs on a CUDA device, beside a device-to-device copy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CastTiming {
    /// The cast kernel into an output allocated beforehand (in Checked and Exact modes the check
    /// kernel and its read-back too), timed with CUDA events.
    pub kernel: Duration,
    /// A device-to-device copy that reads and writes as many bytes as the cast (half of the cast's
    /// read + write volume each way), timed with CUDA events.
    pub copy: Duration,
    /// The whole cast as `Tensor::to` runs it on the device (the output allocated from the
    /// stream's memory pool, then the kernels), timed with CUDA events as torch's `.to()` is
    /// timed by `scripts/torch_cuda_bench.py`.
    pub to: Duration,
}

/// Times casting `src` (elements of `from`, already on the host) to `to` on device `ordinal`.
pub fn time_cast(
    ordinal: u8,
    src: &[u8],
    from: DType,
    to: DType,
    mode: CastMode,
    repeat: u32,
) -> Result<CastTiming, TensorError> {
    let cuda = backend_of(ordinal)?;
    let n = super::elements_of(from, src.len())?;
    let out_len = super::bytes_of(to, n)?;
    let on_device = cuda.upload(src)?;
    let input = cuda.storage(on_device.as_ref())?;
    let mut out = cuda.alloc_for_writing(out_len)?;
    let half = (src.len() + out_len) / 2;
    let copy_from = cuda.alloc_zeroed(half)?;
    let mut copy_to = cuda.alloc_for_writing(half)?;
    let event = || {
        cuda.ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda_error)
    };
    let (e0, e1, e2) = (event()?, event()?, event()?);
    let copy = |to: &mut cudarc::driver::CudaSlice<u8>| {
        cuda.stream
            .memcpy_dtod(&copy_from.slice(0..half), &mut to.slice_mut(0..half))
            .map_err(cuda_error)
    };
    // Warm-up: compiles the kernels and touches every buffer.
    cuda.cast_into(&input.buf, &mut out, n, from, to, mode)?;
    copy(&mut copy_to)?;
    cuda.cast(on_device.as_ref(), from, to, mode)?;
    cuda.synchronize()?;
    let (mut kernel, mut copies, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..repeat.max(1) {
        e0.record(&cuda.stream).map_err(cuda_error)?;
        cuda.cast_into(&input.buf, &mut out, n, from, to, mode)?;
        e1.record(&cuda.stream).map_err(cuda_error)?;
        copy(&mut copy_to)?;
        e2.record(&cuda.stream).map_err(cuda_error)?;
        kernel.push(seconds(e0.elapsed_ms(&e1).map_err(cuda_error)?));
        copies.push(seconds(e1.elapsed_ms(&e2).map_err(cuda_error)?));
        e0.record(&cuda.stream).map_err(cuda_error)?;
        let result = cuda.cast(on_device.as_ref(), from, to, mode)?;
        e1.record(&cuda.stream).map_err(cuda_error)?;
        whole.push(seconds(e0.elapsed_ms(&e1).map_err(cuda_error)?));
        drop(result);
    }
    Ok(CastTiming {
        kernel: median(kernel),
        copy: median(copies),
        to: median(whole),
    })
}

/// Host ↔ device transfers of one buffer, each direction three ways.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransferTiming {
    /// Bytes moved per transfer.
    pub bytes: usize,
    /// Host → device from ordinary (pageable) memory: `Tensor::to(cuda)`'s blocking path.
    pub h2d_pageable: Duration,
    /// Host → device from a page-locked buffer allocated beforehand: the bus alone.
    pub h2d_pinned: Duration,
    /// Host → device as `to(cuda)` does it: through the backend's page-locked staging buffers,
    /// the host threads filling one while the bus empties another.
    pub h2d_staged: Duration,
    /// Device → host into ordinary memory.
    pub d2h_pageable: Duration,
    /// Device → host into a page-locked buffer allocated beforehand.
    pub d2h_pinned: Duration,
    /// Device → host as `to(cpu)` does it: through the backend's staging buffers into ordinary
    /// memory, the bus filling one buffer while the host threads empty another.
    pub d2h_staged: Duration,
}

/// Times moving `bytes` bytes between the host and device `ordinal`.
pub fn time_transfers(
    ordinal: u8,
    bytes: usize,
    repeat: u32,
) -> Result<TransferTiming, TensorError> {
    let cuda = backend_of(ordinal)?;
    let bytes = bytes.max(1 << 16);
    let host: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; bytes];
    let mut device = cuda.alloc_for_writing(bytes)?;
    // SAFETY: both page-locked buffers are written whole before they are read (below).
    let mut pinned_up = unsafe { cuda.ctx.alloc_pinned::<u8>(bytes) }.map_err(cuda_error)?;
    pinned_up
        .as_mut_slice()
        .map_err(cuda_error)?
        .copy_from_slice(&host);
    // SAFETY: as above; filled by the device → host transfers before any read.
    let mut pinned_down =
        unsafe { cuda.ctx.alloc_pinned_with_flags::<u8>(bytes, 0) }.map_err(cuda_error)?;
    let on_device = cuda.upload(&host)?;
    // One transfer, until the device is idle again.
    let timed = |transfer: &mut dyn FnMut() -> Result<(), TensorError>| {
        let t = Instant::now();
        transfer()?;
        cuda.synchronize()?;
        Ok::<_, TensorError>(t.elapsed())
    };
    let mut times = [const { Vec::new() }; 6];
    for round in 0..=repeat.max(1) {
        let lap = [
            timed(&mut || {
                cuda.stream
                    .memcpy_htod(&host, &mut device)
                    .map_err(cuda_error)
            })?,
            timed(&mut || {
                cuda.stream
                    .memcpy_htod(&pinned_up, &mut device)
                    .map_err(cuda_error)
            })?,
            timed(&mut || cuda.upload_with(&host, true).map(drop))?,
            timed(&mut || {
                cuda.stream
                    .memcpy_dtoh(&device, &mut back)
                    .map_err(cuda_error)
            })?,
            timed(&mut || {
                cuda.stream
                    .memcpy_dtoh(&device, &mut pinned_down)
                    .map_err(cuda_error)
            })?,
            timed(&mut || cuda.download(on_device.as_ref(), &mut back))?,
        ];
        // Round 0 warms up (first touches of the buffers, the driver's own staging).
        if round > 0 {
            for (all, one) in times.iter_mut().zip(lap) {
                all.push(one);
            }
        }
    }
    if back != host || pinned_down.as_slice().map_err(cuda_error)? != host.as_slice() {
        return Err(TensorError::Cuda(
            "a timed transfer did not read back what was sent".to_owned(),
        ));
    }
    let [a, b, c, d, e, f] = times.map(median);
    Ok(TransferTiming {
        bytes,
        h2d_pageable: a,
        h2d_pinned: b,
        h2d_staged: c,
        d2h_pageable: d,
        d2h_pinned: e,
        d2h_staged: f,
    })
}

/// What quantizing a weight with a scheme and dequantizing it back cost on a CUDA device, each
/// beside a device-to-device copy of as many bytes, and what they gave (for a comparison with
/// the CPU's bytes).
#[derive(Clone, Debug)]
pub struct ScaledTiming {
    /// [`quantize`](super::quantize()) whole, wall clock until the device is idle: the amax
    /// kernels, the amaxes' download, the scale rules on the host, the factors' upload and the
    /// element kernel.
    pub quantize: Duration,
    /// [`dequantize`](super::dequantize()) whole, wall clock until the device is idle (wide scales
    /// downloaded for their factors, the factors uploaded, the kernel).
    pub dequantize: Duration,
    /// A device-to-device copy that reads and writes as many bytes as quantizing (the dense
    /// input, the codes and the scales; half each way), wall clock like the work.
    pub quantize_copy: Duration,
    /// The same for dequantizing (codes and scales in, the dense output out).
    pub dequantize_copy: Duration,
    /// The bytes read + written by quantizing (dense input, codes, scales).
    pub quantize_bytes: usize,
    /// The bytes read + written by dequantizing (codes, scales, dense output).
    pub dequantize_bytes: usize,
    /// The quantized weight, downloaded: codes, scales, global scale.
    pub quantized: (Vec<u8>, Vec<u8>, Option<f32>),
    /// The dequantized weight, downloaded.
    pub dense: Vec<u8>,
}

/// Times quantizing `x` (a float32 or bfloat16 tensor on the host, uploaded first) with `scheme`
/// on device `ordinal`, and dequantizing the result into `out`: the median of `repeat` rounds,
/// each running the four steps (quantize, its copy, dequantize, its copy) in turn.
pub fn time_scaled(
    ordinal: u8,
    x: &Tensor,
    scheme: &Scheme,
    out: DType,
    repeat: u32,
) -> Result<ScaledTiming, TensorError> {
    let cuda = backend_of(ordinal)?;
    let device = Device::Cuda(ordinal);
    let x = x.to(device)?;
    // Warm-up: compiles the kernels, fills the memory pool.
    let q = quantize(&x, scheme)?;
    let dense_of = |q: &DeviceQuantized| {
        dequantize(
            &q.elements,
            &q.scales,
            x.shape(),
            q.global_scale,
            scheme,
            out,
        )
    };
    let dense = dense_of(&q)?;
    let packed = q.elements.storage().len() + q.scales.storage().len();
    let quantize_bytes = x.storage().len() + packed;
    let dequantize_bytes = packed + dense.storage().len();
    let half = quantize_bytes.max(dequantize_bytes) / 2;
    let copy_from = cuda.alloc_zeroed(half)?;
    let mut copy_to = cuda.alloc_for_writing(half)?;
    let mut copy = |bytes: usize| {
        let t = Instant::now();
        cuda.stream
            .memcpy_dtod(
                &copy_from.slice(0..bytes / 2),
                &mut copy_to.slice_mut(0..bytes / 2),
            )
            .map_err(cuda_error)?;
        cuda.synchronize()?;
        Ok::<_, TensorError>(t.elapsed())
    };
    copy(quantize_bytes)?;
    let mut times = [const { Vec::new() }; 4];
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let again = quantize(&x, scheme)?;
        cuda.synchronize()?;
        times[0].push(t.elapsed());
        drop(again);
        times[1].push(copy(quantize_bytes)?);
        let t = Instant::now();
        let again = dense_of(&q)?;
        cuda.synchronize()?;
        times[2].push(t.elapsed());
        drop(again);
        times[3].push(copy(dequantize_bytes)?);
    }
    let [quantize, quantize_copy, dequantize, dequantize_copy] = times.map(median);
    Ok(ScaledTiming {
        quantize,
        dequantize,
        quantize_copy,
        dequantize_copy,
        quantize_bytes,
        dequantize_bytes,
        quantized: (q.elements.to_bytes()?, q.scales.to_bytes()?, q.global_scale),
        dense: dense.to_bytes()?,
    })
}

fn seconds(ms: f32) -> Duration {
    Duration::from_secs_f64(f64::from(ms) / 1e3)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
