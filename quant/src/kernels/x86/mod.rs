//! x86-64: the AVX2 and AVX-512 forms of dtcast-quant's one-pass kernels, one module per
//! concern beside the portable definition it is tested against (`kernels::<concern>`). The one
//! place in this crate that names x86: `kernels/mod.rs` declares it for x86-64 builds only, and
//! the portable modules reach it as `x86::…` under the same `cfg`.

pub(crate) mod amax16;
pub(crate) mod columns;
pub(crate) mod e4m3;
pub(crate) mod encode4;
pub(crate) mod encode8;
pub(crate) mod gather4;
pub(crate) mod lines;
pub(crate) mod lookup4;
pub(crate) mod narrow;
pub(crate) mod simd;
pub(crate) mod thresholds;
pub(crate) mod words;
