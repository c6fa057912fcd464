//! Compiling the kernels of many casts at once, ahead of their first use: [`precompile`].
//!
//! A cast compiles its kernel the first time its pair and mode meet a device (NVRTC, then the
//! driver loads the code): a tenth of a second each, which a conversion of a few dtypes never
//! notices and a program that casts every pair does — the GPU test suite compiles thousands. Here
//! the kernels go to NVRTC many to a program (its parsing of `kernels.cu` paid once per program,
//! each kernel renamed, as CI compiles them without a GPU) and the programs spread over the cores;
//! each function is then put in the device's cache, where the casts find it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use dtcast_cast::CastMode;
use dtcast_dtype::DType;

use super::{backend_of, cuda_casts, cuda_error, function_name, program, Cuda};
use crate::error::TensorError;

/// Kernels per NVRTC program: enough that the fixed cost is shared, few enough that a handful
/// of programs keep every core busy.
const PER_PROGRAM: usize = 32;

/// Compiles, on device `ordinal`, every kernel that casting `from` to `to` in `mode` uses, for
/// each of `casts` (Checked and Exact: the check kernel and the cast kernel; a cast to the same
/// dtype uses none), in parallel, many kernels to an NVRTC program; those already compiled are
/// left as they are. The casts then start without compiling. Returns the number of kernels
/// compiled.
///
/// Without a GPU this returns `TensorError::CudaUnavailable`; a pair the CUDA kernels do not
/// cast is `CastError::Unsupported`, before anything is compiled.
///
/// ```
/// use dtcast_cast::CastMode;
/// use dtcast_device::cuda;
/// use dtcast_dtype::DType;
/// let casts = [(DType::Float32, DType::BFloat16, CastMode::Checked)];
/// match cuda::precompile(0, &casts) {
///     Ok(compiled) => assert!(compiled <= 2), // the check kernel and the cast kernel
///     Err(e) => assert!(e.to_string().starts_with("CUDA is not available")),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn precompile(ordinal: u8, casts: &[(DType, DType, CastMode)]) -> Result<usize, TensorError> {
    let cuda = backend_of(ordinal)?;
    let mut seen = HashSet::new();
    let mut kernels = Vec::new();
    for &(from, to, mode) in casts {
        cuda_casts(from, to)?;
        if from == to {
            continue;
        }
        let used: &[CastMode] = match mode {
            CastMode::Checked | CastMode::Exact => &[mode, CastMode::Torch],
            CastMode::Saturate => &[CastMode::Saturate],
            CastMode::Torch => &[CastMode::Torch],
        };
        for &m in used {
            let key = (from, to, m);
            if !cuda.kernels.contains(&key) && seen.insert(key) {
                kernels.push(key);
            }
        }
    }
    let programs: Vec<&[(DType, DType, CastMode)]> = kernels.chunks(PER_PROGRAM).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(programs.len());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    while let Some(p) = programs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        cuda.compile_program(p)?;
                    }
                    Ok::<(), TensorError>(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| TensorError::Cuda("a thread compiling kernels panicked".to_owned()))?
        })
    })?;
    Ok(kernels.len())
}

impl Cuda {
    /// Compiles `kernels` as one program, loads it, and caches each kernel's function under its
    /// pair and mode (its [`function_name`], renamed by [`program`] with the kernel's index).
    fn compile_program(&self, kernels: &[(DType, DType, CastMode)]) -> Result<(), TensorError> {
        let src = program(kernels);
        let what = format!("{} cast kernels", kernels.len());
        let code = self.code_for(src, &what)?;
        let module = self.ctx.load_module(code).map_err(cuda_error)?;
        for (k, &(from, to, mode)) in kernels.iter().enumerate() {
            let name = format!("{}_{k}", function_name(mode));
            let function = module.load_function(&name).map_err(cuda_error)?;
            self.kernels
                .get_or_build((from, to, mode), || Ok(function))?;
        }
        Ok(())
    }
}
