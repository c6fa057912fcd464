//! What `x86/mod.rs` provides, for builds without it (other CPUs, or `DTCAST_ISA=portable`):
//! no AVX2 or AVX-512, no cache hints.

use super::steps::Step;
use super::Fast;

/// Never: not an x86-64 build.
pub(crate) fn avx2_available() -> bool {
    false
}

/// Never: not an x86-64 build.
pub(crate) fn avx512_available() -> bool {
    false
}

/// Never: not an x86-64 build.
pub(crate) fn looks_up_bytes(_isa: crate::isa::Isa, _width: usize) -> bool {
    false
}

/// Nothing converted: not an x86-64 build (the caller looks every byte up).
pub(crate) fn look_up_bytes(
    _isa: crate::isa::Isa,
    _planes: &[[u8; 256]],
    _src: &[u8],
    _dst: &mut [u8],
) -> usize {
    0
}

/// None: not an x86-64 build.
pub(crate) fn avx2_screened<K: Step>() -> Option<super::ScreenedKernel> {
    None
}

pub(crate) fn avx512_screened<K: Step>() -> Option<super::ScreenedKernel> {
    None
}

pub(crate) fn avx2_kernel<K: Step>() -> Option<Fast> {
    None
}

/// None: not an x86-64 build.
pub(crate) fn avx512_kernel<K: Step>() -> Option<Fast> {
    None
}

/// Code that x86 builds may compile for AVX-512.
pub(crate) trait Task {
    /// What the task returns.
    type Output;
    /// Does the work.
    fn run(self) -> Self::Output;
}

/// Runs `task`.
pub(crate) fn with_avx512<T: Task>(task: T) -> T::Output {
    task.run()
}

/// Runs `task`.
pub(crate) fn with_avx2<T: Task>(task: T) -> T::Output {
    task.run()
}

/// Nothing: no portable prefetch hint.
#[inline(always)]
pub(crate) fn prefetch_ahead(_p: *const u8, _lines: usize) {}

/// No streaming stores here: [`stream`] is an ordinary store.
pub(crate) const STREAMS: bool = false;

/// Writes `bytes` at `p`.
///
/// # Safety
/// `p` must be valid for `bytes.len()` bytes of writes.
#[inline(always)]
pub(crate) unsafe fn stream(p: *mut u8, bytes: &[u8]) {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) }
}

/// Nothing: no streaming stores here.
#[inline(always)]
pub(crate) fn store_fence() {}
