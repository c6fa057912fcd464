//! SIMD fast paths for the hot pairs, chosen once at run time by CPU features.
//!
//! This module only selects; each backend lives in its own file. Every fast kernel gives the same
//! bytes as the scalar rules (`lanes.rs`) for every input — the property tests compare them on
//! random bit patterns, NaN payloads, subnormals and out-of-range values included, for every
//! backend the machine has.
//!
//! Build with `RUSTFLAGS='--cfg dtcast_backend="scalar"'` to use the scalar kernels everywhere.

use dtcast_dtype::DType;

use crate::dispatch::Kernel;

#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod x86_avx2;
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod x86_avx512;

/// A set of fast kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// No fast paths: the scalar kernels (always available).
    Scalar,
    /// x86-64 AVX2 + F16C: every hot pair but Saturate float64 → bfloat16.
    Avx2,
    /// x86-64 AVX-512 (F, BW, VL, DQ): every hot pair.
    Avx512,
}

impl Backend {
    /// Whether this machine (and this build) can use the backend.
    pub fn is_available(self) -> bool {
        match self {
            Backend::Scalar => true,
            #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
            Backend::Avx2 => x86_avx2::available(),
            #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
            Backend::Avx512 => x86_avx512::available(),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

/// The backends this machine can use, best last.
pub fn backends() -> Vec<Backend> {
    [Backend::Scalar, Backend::Avx2, Backend::Avx512]
        .into_iter()
        .filter(|b| b.is_available())
        .collect()
}

/// The best backend of this machine (what [`cast`](crate::cast) uses).
pub fn backend() -> Backend {
    backends().last().copied().unwrap_or(Backend::Scalar)
}

/// Destinations from this size on are written with streaming (non-temporal) stores: a cast writes
/// a buffer it will not read back, and streaming stores skip the read-for-ownership that ordinary
/// stores cost, which matters most for widening pairs.
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
const STREAM_BYTES: usize = 1 << 20;

/// Runs a SIMD loop over `src` → `dst` the way every backend does: when `available`, destinations
/// of [`STREAM_BYTES`] and more first get a few scalar elements so that the destination pointer is
/// 64-byte aligned, then `simd(src, dst, n, stream)` converts `n` elements (a multiple of `lanes`);
/// the scalar kernel converts whatever is left.
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
#[inline(always)]
fn drive<S: crate::lanes::Lane, D: crate::lanes::Lane, const SATURATE: bool>(
    src: &[u8],
    dst: &mut [u8],
    lanes: usize,
    available: bool,
    simd: impl FnOnce(&[u8], &mut [u8], usize, bool),
) {
    let (ss, ds) = (S::SIZE, D::SIZE);
    let n = (src.len() / ss).min(dst.len() / ds);
    let mut done = 0;
    if available {
        let stream = dst.len() >= STREAM_BYTES && (dst.as_ptr() as usize).is_multiple_of(ds);
        if stream {
            done = (((64 - (dst.as_ptr() as usize) % 64) % 64) / ds).min(n);
            crate::dispatch::convert::<S, D, SATURATE>(&src[..done * ss], &mut dst[..done * ds]);
        }
        let full = (n - done) - (n - done) % lanes;
        simd(&src[done * ss..], &mut dst[done * ds..], full, stream);
        done += full;
    }
    crate::dispatch::convert::<S, D, SATURATE>(&src[done * ss..], &mut dst[done * ds..]);
}

/// The fast kernel of `backend` for a pair and mode, if it has one and the CPU supports it.
pub(crate) fn select(backend: Backend, from: DType, to: DType, saturate: bool) -> Option<Kernel> {
    if !backend.is_available() {
        return None;
    }
    match backend {
        #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
        Backend::Avx512 => {
            x86_avx512::select(from, to, saturate).or_else(|| x86_avx2::select(from, to, saturate))
        }
        #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
        Backend::Avx2 => x86_avx2::select(from, to, saturate),
        _ => {
            let _ = (from, to, saturate);
            None
        }
    }
}
