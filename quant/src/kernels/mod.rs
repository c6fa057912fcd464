//! The one-pass kernels, each beside the portable definition it is tested against — the same
//! layout as `dtcast_cast::kernels`: one module per concern (`amax16`, `encode4`, `encode8` and
//! `thresholds` quantize; `lookup4` and `e4m3` dequantize; `simd` compiles the plain loops for
//! the chosen instruction set), and their AVX2 and AVX-512 forms in `x86/`, the one module of
//! this crate that names x86, declared for x86-64 builds only.

pub(crate) mod amax16;
pub(crate) mod e4m3;
pub(crate) mod encode4;
pub(crate) mod encode8;
pub(crate) mod lookup4;
pub(crate) mod simd;
pub(crate) mod thresholds;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
