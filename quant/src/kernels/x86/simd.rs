//! The `#[target_feature]` wrappers [`crate::simd::with_best_isa`] runs a closure in, one per
//! x86-64 instruction set.

/// # Safety
/// The CPU runs AVX-512 F, BW, VL and DQ.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
pub(crate) unsafe fn avx512<R>(work: impl FnOnce() -> R) -> R {
    work()
}

/// # Safety
/// The CPU runs AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn avx2<R>(work: impl FnOnce() -> R) -> R {
    work()
}
