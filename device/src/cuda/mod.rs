//! The CUDA backend (feature `cuda`): cudarc with the driver and NVRTC loaded at run time.
//!
//! Nothing is linked at build time. Before anything touches CUDA, the driver library is looked
//! for; without it, or without a GPU, every call returns `TensorError::CudaUnavailable` naming the
//! reason — cudarc would otherwise panic on a missing library. Cast kernels are compiled by NVRTC
//! from `kernels.cu` (with its per-dtype parts written from the dtype table: `source.rs`) the
//! first time a (source, destination, mode) is used on a device (or ahead of use, many at once, by
//! [`precompile`]), and cached for that device's context.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use dtcast_cast::{cast_to_vec, CastError, CastMode, Quirks};
use dtcast_dtype::DType;

use crate::backend::{Backend, Storage};
use crate::error::TensorError;
use crate::Device;
use compiled::Compiled;

mod compiled;
mod prepare;
mod scaled;
mod source;
mod staging;
mod timing;
pub use prepare::precompile;
pub use scaled::{
    arithmetic_code, compile_scaled_kernels, dequant_line, dequantize, quantize, quantize_line,
    DeviceQuantized,
};
pub use source::{formats_cuh, kernel_source, lane, lanes_cuh};
pub use timing::{
    time_cast, time_scaled, time_transfers, CastTiming, ScaledTiming, TransferTiming,
};

/// Whether the driver library can be loaded, and why not.
fn driver_library() -> Result<(), TensorError> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: `is_culib_present` only tries to open the shared library by its usual names.
    let present = *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() });
    if present {
        Ok(())
    } else {
        Err(TensorError::CudaUnavailable(
            "the CUDA driver library (libcuda.so) was not found on this machine".to_owned(),
        ))
    }
}

fn nvrtc_library() -> Result<(), TensorError> {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: as above, for libnvrtc.
    let present = *PRESENT.get_or_init(|| unsafe { cudarc::nvrtc::sys::is_culib_present() });
    if present {
        Ok(())
    } else {
        Err(TensorError::CudaUnavailable(
            "the NVRTC library, needed to compile cast kernels, was not found as libnvrtc.so or \
             libnvrtc.so.12 on the library path (a CUDA toolkit has libnvrtc.so in its lib64 \
             directory; add that to LD_LIBRARY_PATH)"
                .to_owned(),
        ))
    }
}

/// The number of CUDA devices (0 when the driver library is missing or reports an error).
pub(crate) fn device_count() -> usize {
    if driver_library().is_err() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// `cuda:N (name, memory)` per device, or one line saying why there is none.
pub(crate) fn describe() -> Vec<String> {
    if let Err(TensorError::CudaUnavailable(why)) = driver_library() {
        return vec![format!("cuda: not available ({why})")];
    }
    let count = match CudaContext::device_count() {
        Ok(n) => usize::try_from(n).unwrap_or(0),
        Err(e) => {
            return vec![format!(
                "cuda: not available (the CUDA driver failed to start: {e:?})"
            )]
        }
    };
    if count == 0 {
        return vec!["cuda: not available (the CUDA driver reports no device)".to_owned()];
    }
    (0..count.min(128))
        .map(|i| match CudaContext::new(i) {
            Ok(ctx) => {
                let name = ctx.name().unwrap_or_else(|_| "unknown GPU".to_owned());
                let mem = ctx.total_mem().map_or_else(
                    |_| "unknown memory".to_owned(),
                    |b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
                );
                format!("cuda:{i} ({name}, {mem})")
            }
            Err(e) => format!("cuda:{i}: not usable ({e:?})"),
        })
        .collect()
}

fn cuda_error(e: impl std::fmt::Debug) -> TensorError {
    TensorError::Cuda(format!("{e:?}"))
}

/// The backend of CUDA device `ordinal`, created on first use.
pub(crate) fn backend(ordinal: u8) -> Result<Arc<dyn Backend>, TensorError> {
    backend_of(ordinal).map(|cuda| cuda as Arc<dyn Backend>)
}

fn backend_of(ordinal: u8) -> Result<Arc<Cuda>, TensorError> {
    static BACKENDS: OnceLock<Mutex<HashMap<u8, Arc<Cuda>>>> = OnceLock::new();
    driver_library()?;
    let count = device_count();
    if usize::from(ordinal) >= count {
        return Err(TensorError::CudaUnavailable(if count == 0 {
            "no CUDA device was found (the driver reports none)".to_owned()
        } else {
            format!("cuda:{ordinal} does not exist; this machine has {count} CUDA device(s)")
        }));
    }
    let mut map = BACKENDS
        .get_or_init(Default::default)
        .lock()
        .map_err(|_| TensorError::Cuda("backend registry poisoned".to_owned()))?;
    if let Some(b) = map.get(&ordinal) {
        return Ok(Arc::clone(b));
    }
    let ctx = CudaContext::new(usize::from(ordinal)).map_err(cuda_error)?;
    let stream = ctx.default_stream();
    let pool = ctx
        .has_async_alloc()
        .then(|| keep_freed_memory(&ctx))
        .flatten();
    let arch = ctx
        .compute_capability()
        .ok()
        .map(|(major, minor)| format!("compute_{major}{minor}"));
    let cuda = Arc::new(Cuda {
        ordinal,
        ctx,
        stream,
        kernels: Compiled::new(),
        scaled: Compiled::new(),
        pool,
        staging: Mutex::new(Vec::new()),
        arch,
    });
    map.insert(ordinal, Arc::clone(&cuda));
    Ok(cuda)
}

/// The device's default memory pool, which allocations come from (stream-ordered).
#[derive(Clone, Copy)]
struct Pool(cudarc::driver::sys::CUmemoryPool);
// SAFETY: a memory pool handle is a process-wide driver object, usable from any thread.
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

/// Lets the default memory pool keep what is freed for the next allocation (as torch's caching
/// allocator does) instead of handing it back to the driver at every synchronisation, which made
/// each new tensor pay for mapping fresh memory. `None` if the pool cannot be had.
fn keep_freed_memory(ctx: &Arc<CudaContext>) -> Option<Pool> {
    use cudarc::driver::sys;
    ctx.bind_to_thread().ok()?;
    let mut pool = std::ptr::null_mut();
    let mut keep = u64::MAX;
    // SAFETY: `pool` receives the device's default pool; the attribute takes a u64.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device())
            .result()
            .ok()?;
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
        .result()
        .ok()?;
    }
    Some(Pool(pool))
}

/// A CUDA device's backend.
pub struct Cuda {
    ordinal: u8,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernels: Compiled<(DType, DType, CastMode), CudaFunction>,
    /// The scaled-format programs (`scaled.rs`), by their source line.
    scaled: Compiled<String, Arc<CudaModule>>,
    /// The memory pool that keeps freed memory, trimmed when an allocation runs out.
    pool: Option<Pool>,
    /// Page-locked buffers for transfers (see `staging.rs`), kept for reuse.
    staging: Mutex<Vec<staging::Buffer>>,
    /// NVRTC's name of this device's architecture (`compute_90`).
    arch: Option<String>,
}

impl std::fmt::Debug for Cuda {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cuda({})", self.ordinal)
    }
}

/// Bytes on a CUDA device. A zero-length storage holds a one-byte allocation.
pub struct CudaStorage {
    buf: CudaSlice<u8>,
    len: usize,
    ordinal: u8,
}

/// Threads per block of the cast and check kernels.
const BLOCK_THREADS: u32 = 256;

/// The launch of a kernel over `n` elements cast from `from` to `to`: a thread per two tiles (a
/// tile: the elements in 16 bytes on the wider side, `Tile` in `kernels.cu`), the kernels'
/// grid-stride loops covering any rest.
fn launch_config(n: usize, from: DType, to: DType) -> LaunchConfig {
    let tiles = n.div_ceil(tile_elements(from, to));
    // The cast kernel's threads take two tiles per step; the check kernel's grid-stride loop
    // covers the rest of its tiles with the same grid.
    let blocks = tiles.div_ceil(2 * BLOCK_THREADS as usize).clamp(1, 1 << 20);
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaStorage(cuda:{}, {} bytes)", self.ordinal, self.len)
    }
}

impl Storage for CudaStorage {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Whether the CUDA kernels cast `from` → `to`: every pair of dtypes with values (a dtype to
/// itself is a copy), as on the CPU.
fn cuda_casts(from: DType, to: DType) -> Result<(), TensorError> {
    if from == to || (lane(from).is_some() && lane(to).is_some()) {
        Ok(())
    } else {
        Err(CastError::Unsupported { from, to }.into())
    }
}

/// The elements of one kernel tile (`Tile` in `kernels.cu`): as many as fit in 16 bytes on the
/// wider side, or 8 where a side is packed (8 elements of any width end on a byte).
pub fn tile_elements(from: DType, to: DType) -> usize {
    if from.is_packed() || to.is_packed() {
        8
    } else {
        16 / unit(from).max(unit(to))
    }
}

/// Bytes per element as the kernels hold one (packed dtypes: one byte, unpacked in the tile).
fn unit(dtype: DType) -> usize {
    dtype.byte_size().unwrap_or(1)
}

/// The bytes of `n` elements of `dtype` in storage; an error where they end inside a byte.
fn bytes_of(dtype: DType, n: usize) -> Result<usize, TensorError> {
    dtype
        .storage_bytes(n)
        .map_err(|_| CastError::NotByteAligned { dtype, elements: n }.into())
}

/// The elements in `len` bytes of `dtype`.
fn elements_of(dtype: DType, len: usize) -> Result<usize, TensorError> {
    dtype
        .elements_in(len)
        .ok_or_else(|| CastError::PartialElement { dtype, len }.into())
}

/// The lane of a dtype that has one (callers check `cuda_casts` first).
fn lane_of(dtype: DType) -> String {
    lane(dtype).unwrap_or_else(|| format!("NoLaneFor_{}", dtype.name()))
}

/// The `DTCAST_KERNEL` line for a pair: lanes, mode and torch's path quirks.
pub fn kernel_line(from: DType, to: DType, saturate: bool) -> String {
    format!(
        "DTCAST_KERNEL({}, {}, {}, {})\n",
        lane_of(from),
        lane_of(to),
        u8::from(saturate),
        quirk_args(from, to)
    )
}

/// The pair's `dtcast_cast::Quirks`, as the arguments of `kernels.cu`'s `Quirks` (same order).
fn quirk_args(from: DType, to: DType) -> String {
    let Quirks {
        f16_to_f32_nan,
        f32_to_bf16_nan,
        float8_nan_to_int_zero,
        part_bits,
        ml,
    } = Quirks::of(from, to);
    format!("{f16_to_f32_nan}, {f32_to_bf16_nan}, {float8_nan_to_int_zero}, {part_bits}, {ml}")
}

/// The `DTCAST_CHECK` line for a pair: lanes, Exact or Checked, quirks, and what `to` can hold
/// (`Limits` in `kernels.cu`, the numbers of dtcast-cast's Checked rules).
pub fn check_line(from: DType, to: DType, exact: bool) -> String {
    let part = to.to_real();
    let hex_f = |x: f64| format!("u2d({:#x}ull)", x.to_bits());
    let hex_i = |x: i64| format!("(i64){:#x}ull", x as u64);
    let (kind, signed, lo_i, hi_i, hi_u, lo_f, hi_excl_f) = if part.is_integral(false) {
        let bits = part.bits() as u32;
        if part.is_signed() {
            let (lo, hi) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
            (
                1,
                true,
                lo as i64,
                hi as i64,
                hi as u64,
                lo as f64,
                (hi + 1) as f64,
            )
        } else {
            let hi = (1i128 << bits) - 1;
            (
                1,
                false,
                0,
                i64::try_from(hi).unwrap_or(i64::MAX),
                hi as u64,
                0.0,
                (hi + 1) as f64,
            )
        }
    } else if part.is_floating_point() {
        (2, true, 0, 0, 0, 0.0, 0.0)
    } else {
        (0, true, 0, 0, 0, 0.0, 0.0)
    };
    let format = part.float_format();
    let (threshold, tie) = format.map_or((0.0, false), |f| f.overflow_threshold());
    let has_inf = format.is_some_and(|f| f.has_inf);
    let has_nan = format.is_some_and(|f| f.nan != dtcast_dtype::NanEncoding::None);
    let fsigned = format.is_none_or(|f| f.signed);
    let has_zero = format.is_none_or(|f| f.has_zero);
    format!(
        "DTCAST_CHECK({}, {}, {}, {}, {kind}, {}, {signed}, {}, {}, {hi_u:#x}ull, {}, {}, {}, {tie}, {has_inf}, {has_nan}, {fsigned}, {has_zero})\n",
        lane_of(from),
        lane_of(to),
        u8::from(exact),
        quirk_args(from, to),
        to.is_complex(),
        hex_i(lo_i),
        hex_i(hi_i),
        hex_f(lo_f),
        hex_f(hi_excl_f),
        hex_f(threshold),
    )
}

/// Compiles the kernel of one pair and mode to PTX with NVRTC, without a GPU (NVRTC needs only its
/// library), for NVRTC's default architecture or for `arch` (e.g. `compute_90`, where the
/// float8 conversion instructions are used). Used by the test suite to check `kernels.cu` where
/// NVRTC is installed.
pub fn compile_kernel(
    from: DType,
    to: DType,
    mode: CastMode,
    arch: Option<&str>,
) -> Result<(), TensorError> {
    ptx(from, to, mode, arch).map(|_| ())
}

/// [`compile_kernel`] for many pairs and modes at once: one NVRTC program holding every kernel,
/// each under a name of its own (NVRTC's fixed cost is paid once).
pub fn compile_kernels(
    kernels: &[(DType, DType, CastMode)],
    arch: Option<&str>,
) -> Result<(), TensorError> {
    compile(
        program(kernels),
        arch,
        &format!("{} kernels", kernels.len()),
        &[],
    )
    .map(|_| ())
}

/// [`compile_kernels`] through NVRTC's front end alone (`-fdevice-syntax-only`): every kernel's
/// source is parsed, its templates instantiated and type-checked for `arch`, and no code is
/// generated — many times faster than generating the PTX, which is where NVRTC spends its time.
pub fn check_kernel_syntax(
    kernels: &[(DType, DType, CastMode)],
    arch: Option<&str>,
) -> Result<(), TensorError> {
    let what = format!("{} kernels (syntax only)", kernels.len());
    compile(program(kernels), arch, &what, &["-fdevice-syntax-only"]).map(|_| ())
}

/// One NVRTC program's source holding the kernels of `kernels`, each under a name of its own.
fn program(kernels: &[(DType, DType, CastMode)]) -> String {
    let mut src = kernel_source();
    for (k, &(from, to, mode)) in kernels.iter().enumerate() {
        // The kernel macros name their function `dtcast_cast` / `dtcast_check`: renamed per line.
        src.push_str(&format!(
            "#define dtcast_cast dtcast_cast_{k}\n#define dtcast_check dtcast_check_{k}\n{}\
             #undef dtcast_cast\n#undef dtcast_check\n",
            source_line(from, to, mode)
        ));
    }
    src
}

/// The function a mode's kernel defines: the check kernel's (Checked, Exact) or the cast kernel's
/// (Torch, Saturate), as [`source_line`] writes them.
fn function_name(mode: CastMode) -> &'static str {
    match mode {
        CastMode::Checked | CastMode::Exact => "dtcast_check",
        CastMode::Torch | CastMode::Saturate => "dtcast_cast",
    }
}

/// The kernel source line for a pair and mode: the cast kernel for Torch and Saturate, the check
/// kernel for Checked and Exact.
fn source_line(from: DType, to: DType, mode: CastMode) -> String {
    match mode {
        CastMode::Checked => check_line(from, to, false),
        CastMode::Exact => check_line(from, to, true),
        _ => kernel_line(from, to, mode == CastMode::Saturate),
    }
}

fn ptx(
    from: DType,
    to: DType,
    mode: CastMode,
    arch: Option<&str>,
) -> Result<cudarc::nvrtc::Ptx, TensorError> {
    compile(
        single_program(from, to, mode),
        arch,
        &kernel_named(from, to, mode),
        &[],
    )
}

/// The NVRTC program of one pair and mode's kernel.
fn single_program(from: DType, to: DType, mode: CastMode) -> String {
    format!("{}\n{}", kernel_source(), source_line(from, to, mode))
}

/// A kernel's name in messages.
fn kernel_named(from: DType, to: DType, mode: CastMode) -> String {
    format!("the {from} -> {to} ({mode}) kernel")
}

/// NVRTC's PTX for `src`, with `extra` options; `what` names it in an error.
fn compile(
    src: String,
    arch: Option<&str>,
    what: &str,
    extra: &[&str],
) -> Result<cudarc::nvrtc::Ptx, TensorError> {
    nvrtc_library()?;
    let options = cudarc::nvrtc::CompileOptions {
        // No contraction of a multiply and an add into one rounding: the rules round each step.
        fmad: Some(false),
        options: arch
            .map(|a| format!("--gpu-architecture={a}"))
            .into_iter()
            .chain(extra.iter().map(|o| o.to_string()))
            .collect(),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src, options).map_err(|e| {
        TensorError::Cuda(format!(
            "compiling {what}{}: {e:?}",
            arch.map(|a| format!(" for {a}")).unwrap_or_default()
        ))
    })
}

impl Cuda {
    fn storage<'a>(&self, s: &'a dyn Storage) -> Result<&'a CudaStorage, TensorError> {
        s.as_any()
            .downcast_ref::<CudaStorage>()
            .filter(|c| c.ordinal == self.ordinal)
            .ok_or(TensorError::WrongDevice {
                backend: Device::Cuda(self.ordinal),
                storage: s.device(),
            })
    }

    /// The compiled kernel for a pair and mode: `dtcast_cast` (Torch, Saturate) or `dtcast_check`
    /// (Checked, Exact), cached for this context.
    fn kernel(&self, from: DType, to: DType, mode: CastMode) -> Result<CudaFunction, TensorError> {
        // Two threads needing the same pair: one compiles, the other waits for it.
        self.kernels.get_or_build((from, to, mode), || {
            let code = self.code_for(
                single_program(from, to, mode),
                &kernel_named(from, to, mode),
            )?;
            let module = self.ctx.load_module(code).map_err(cuda_error)?;
            module
                .load_function(function_name(mode))
                .map_err(cuda_error)
        })
    }

    /// NVRTC's code for `src` (`what` names it in an error): for this device's architecture
    /// (its conversion instructions), else — an NVRTC older than the device — NVRTC's default,
    /// which the driver compiles on for the device.
    fn code_for(&self, src: String, what: &str) -> Result<cudarc::nvrtc::Ptx, TensorError> {
        match compile(src.clone(), self.arch.as_deref(), what, &[]) {
            Err(_) if self.arch.is_some() => compile(src, None, what, &[]),
            other => other,
        }
    }

    /// Checked / Exact on the device: the check kernel finds the first element `to` cannot take;
    /// that one element is then read back and the CPU rules word the error (same text as on the CPU).
    fn check(
        &self,
        src: &CudaSlice<u8>,
        n: usize,
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<(), TensorError> {
        let f = self.kernel(from, to, mode)?;
        let count = n as u64;
        let mut first_bad = self.stream.clone_htod(&[count]).map_err(cuda_error)?;
        let mut launch = self.stream.launch_builder(&f);
        launch.arg(src).arg(&count).arg(&mut first_bad);
        // SAFETY: `dtcast_check(const u8* src, u64 n, u64* first_bad)` reads n elements of `from`
        // (the storage holds n * itemsize bytes) and writes one u64.
        unsafe { launch.launch(launch_config(n, from, to)) }.map_err(cuda_error)?;
        let found = self.stream.clone_dtoh(&first_bad).map_err(cuda_error)?;
        self.stream.synchronize().map_err(cuda_error)?;
        let Some(&index) = found.first().filter(|&&i| i < count) else {
            return Ok(());
        };
        // The element's group of 8 (whole bytes for any width; one element where it is bytes)
        // comes back, and the CPU rules find it the first they refuse in it.
        let i = index as usize;
        let group = if from.is_packed() || to.is_packed() {
            8
        } else {
            1
        };
        let start = i - i % group;
        let count = group.min(n - start);
        let (at, len) = (bytes_of(from, start)?, bytes_of(from, count)?);
        let mut elements = vec![0u8; len];
        self.stream
            .memcpy_dtoh(&src.slice(at..at + len), &mut elements)
            .map_err(cuda_error)?;
        self.stream.synchronize().map_err(cuda_error)?;
        match cast_to_vec(&elements, from, to, mode) {
            Err(CastError::Value { index, value, from, to, kind }) => Err(CastError::Value { index: start + index, value, from, to, kind }.into()),
            Err(e) => Err(e.into()),
            Ok(_) => Err(TensorError::Cuda(format!("the device check refused element {i} of a {from} -> {to} cast that the CPU rules accept"))),
        }
    }

    /// Casts the `n` elements of `src` into `out` (which holds `n * size(to)` bytes): the
    /// check kernel first in Checked and Exact modes, then the cast kernel, queued on the stream.
    fn cast_into(
        &self,
        src: &CudaSlice<u8>,
        out: &mut CudaSlice<u8>,
        n: usize,
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<(), TensorError> {
        cuda_casts(from, to)?;
        if n == 0 {
            return Ok(());
        }
        if from == to {
            let len = bytes_of(to, n)?;
            return self
                .stream
                .memcpy_dtod(&src.slice(0..len), &mut out.slice_mut(0..len))
                .map_err(cuda_error);
        }
        if matches!(mode, CastMode::Checked | CastMode::Exact) {
            self.check(src, n, from, to, mode)?;
        }
        let kernel_mode = if mode == CastMode::Saturate {
            CastMode::Saturate
        } else {
            CastMode::Torch
        };
        let f = self.kernel(from, to, kernel_mode)?;
        let count = n as u64;
        let mut launch = self.stream.launch_builder(&f);
        launch.arg(src).arg(out).arg(&count);
        // SAFETY: `dtcast_cast(const u8* src, u8* dst, u64 n)` reads n source elements and writes
        // n destination elements; the caller's `src` holds n * itemsize(from) bytes and `out`
        // n * itemsize(to) bytes, both from allocations (aligned to 256 bytes, as the kernels'
        // 16-byte tile accesses need).
        unsafe { launch.launch(launch_config(n, from, to)) }
            .map(|_| ())
            .map_err(cuda_error)
    }

    /// `len` bytes (at least one) of device memory, zeroed.
    fn alloc_zeroed(&self, len: usize) -> Result<CudaSlice<u8>, TensorError> {
        let mut buf = self.alloc_for_writing(len)?;
        self.stream.memset_zeros(&mut buf).map_err(cuda_error)?;
        Ok(buf)
    }

    /// `len` bytes (at least one) of device memory that the caller fills whole before anything
    /// reads it (a cast's output, an upload's destination): no zeroing pass. When the device is
    /// out of memory, what the pool keeps from freed tensors is released and the allocation tried
    /// once more.
    fn alloc_for_writing(&self, len: usize) -> Result<CudaSlice<u8>, TensorError> {
        use cudarc::driver::sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY;
        // SAFETY: every caller writes all `len` bytes (a cast kernel or a copy) before the storage
        // can be read; the extra byte of an empty storage is never read.
        let alloc = || unsafe { self.stream.alloc::<u8>(len.max(1)) };
        match (alloc(), self.pool) {
            (Err(e), Some(pool)) if e.0 == CUDA_ERROR_OUT_OF_MEMORY => {
                self.stream.synchronize().map_err(cuda_error)?;
                // SAFETY: trimming releases only memory no allocation holds.
                unsafe { cudarc::driver::sys::cuMemPoolTrimTo(pool.0, 0) }
                    .result()
                    .map_err(cuda_error)?;
                alloc().map_err(cuda_error)
            }
            (result, _) => result.map_err(cuda_error),
        }
    }
}

impl Backend for Cuda {
    fn device(&self) -> Device {
        Device::Cuda(self.ordinal)
    }

    fn allocate(&self, bytes: usize) -> Result<Arc<dyn Storage>, TensorError> {
        Ok(Arc::new(CudaStorage {
            buf: self.alloc_zeroed(bytes)?,
            len: bytes,
            ordinal: self.ordinal,
        }))
    }

    /// Large uploads go through the backend's page-locked staging buffers (see `staging.rs`);
    /// this waits for the last chunk, so the result is on the device when it returns.
    fn upload(&self, host: &[u8]) -> Result<Arc<dyn Storage>, TensorError> {
        self.upload_with(host, false)
    }

    /// Non-blocking, the last chunk may still be on its way when this returns; everything later
    /// on the stream (casts, downloads) runs after it. `host` may be reused at once either way.
    fn upload_with(
        &self,
        host: &[u8],
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        self.upload_cast(
            host,
            DType::UInt8,
            DType::UInt8,
            CastMode::Torch,
            non_blocking,
        )
    }

    /// The cast runs on the host threads straight into the staging buffers, chunk by chunk, while
    /// the bus moves the previous chunk: the narrower dtype is what crosses, and the cast output
    /// is never written to pageable memory.
    fn upload_cast(
        &self,
        host: &[u8],
        from: DType,
        to: DType,
        mode: CastMode,
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        cuda_casts(from, to)?;
        let n = elements_of(from, host.len())?;
        let len = bytes_of(to, n)?;
        let buf = if host.len().max(len) >= staging::STAGED_BYTES {
            self.upload_staged(host, from, to, mode)?
        } else {
            let cast_on_host;
            let bytes = if from == to {
                host
            } else {
                cast_on_host = cast_to_vec(host, from, to, mode)?;
                &cast_on_host[..]
            };
            let mut buf = self.alloc_for_writing(bytes.len())?;
            if !bytes.is_empty() {
                let mut view = buf.slice_mut(0..bytes.len());
                // From pageable memory the driver copies `bytes` out before this returns.
                self.stream
                    .memcpy_htod(bytes, &mut view)
                    .map_err(cuda_error)?;
            }
            buf
        };
        if !non_blocking {
            self.stream.synchronize().map_err(cuda_error)?;
        }
        Ok(Arc::new(CudaStorage {
            buf,
            len,
            ordinal: self.ordinal,
        }))
    }

    /// To the CPU: straight into the new CPU storage (through the staging buffers when large);
    /// to another device: through host memory.
    fn copy_to(
        &self,
        src: &dyn Storage,
        target: &dyn Backend,
        non_blocking: bool,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        let s = self.storage(src)?;
        if target.device().is_cpu() {
            let mut host = crate::cpu::CpuStorage::try_zeroed(s.len)?;
            self.download(src, host.bytes_mut())?;
            return Ok(Arc::new(host));
        }
        let host = self.download_vec(src)?;
        target.upload_with(&host, non_blocking)
    }

    fn download(&self, storage: &dyn Storage, host: &mut [u8]) -> Result<(), TensorError> {
        let s = self.storage(storage)?;
        if host.len() != s.len {
            return Err(TensorError::Shape {
                shape: vec![host.len()],
                needed: Some(host.len()),
                given: s.len,
            });
        }
        if host.len() >= staging::STAGED_BYTES {
            return self.download_staged(&s.buf, host);
        }
        if !host.is_empty() {
            self.stream
                .memcpy_dtoh(&s.buf.slice(0..s.len), host)
                .map_err(cuda_error)?;
        }
        self.stream.synchronize().map_err(cuda_error)
    }

    fn cast(
        &self,
        src: &dyn Storage,
        from: DType,
        to: DType,
        mode: CastMode,
    ) -> Result<Arc<dyn Storage>, TensorError> {
        cuda_casts(from, to)?;
        let s = self.storage(src)?;
        let n = elements_of(from, s.len)?;
        let len = bytes_of(to, n)?;
        let mut out = self.alloc_for_writing(len)?;
        self.cast_into(&s.buf, &mut out, n, from, to, mode)?;
        Ok(Arc::new(CudaStorage {
            buf: out,
            len,
            ordinal: self.ordinal,
        }))
    }

    fn synchronize(&self) -> Result<(), TensorError> {
        self.stream.synchronize().map_err(cuda_error)
    }
}
