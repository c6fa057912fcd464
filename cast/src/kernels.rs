//! SIMD fast paths for the hot pairs, chosen once at run time by CPU features.
//!
//! This module only selects; each backend lives in its own file. Every fast kernel gives the same
//! bytes as the scalar rules (`lanes.rs`) for every input — the property tests compare them on
//! random bit patterns, NaN payloads, subnormals and out-of-range values included.
//!
//! Build with `RUSTFLAGS='--cfg dtcast_backend="scalar"'` to use the scalar kernels everywhere.

use dtcast_dtype::DType;

use crate::dispatch::Kernel;

#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod x86_avx512;

/// The SIMD instruction set the fast paths use on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// No fast paths: the scalar kernels (no SIMD support found, or forced by
    /// `--cfg dtcast_backend="scalar"`).
    Scalar,
    /// x86-64 AVX-512 (F, BW, VL, DQ): every hot pair.
    Avx512,
}

/// The backend in use, detected once.
pub fn backend() -> Backend {
    #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
    {
        if x86_avx512::available() {
            return Backend::Avx512;
        }
    }
    Backend::Scalar
}

/// The fast kernel for a pair and mode, if this machine has one.
pub(crate) fn select(from: DType, to: DType, saturate: bool) -> Option<Kernel> {
    match backend() {
        #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
        Backend::Avx512 => x86_avx512::select(from, to, saturate),
        _ => {
            let _ = (from, to, saturate);
            None
        }
    }
}
