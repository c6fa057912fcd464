//! x86-64: the AVX2 and AVX-512 implementations of [`Vector`](super::vector::Vector), their run-time detection, and the
//! cache hints every kernel uses. The one place that names x86: `kernels/mod.rs` declares this
//! module for x86-64 builds and `x86_absent.rs` in its place elsewhere (or with
//! `DTCAST_ISA=portable`).

/// The entry points of one x86 instruction set, written once: `run` / `run_screened` (the step
/// loops compiled with `$features`), and `kernel` / `screened` (the `Kernel` and `ScreenedKernel`
/// over them, converting only when `$available()` says the CPU has `$what`).
macro_rules! entry_points {
    ($vec:ty, $features:literal, $available:ident, $what:literal) => {
        /// Converts `n` elements by step `K`.
        ///
        /// # Safety
        #[doc = concat!("The CPU must have ", $what, "; `n` elements must fit both buffers; when")]
        /// `STREAM`, `d` must be aligned to 64 bytes.
        #[target_feature(enable = $features)]
        unsafe fn run<K: Step, const STREAM: bool>(s: *const u8, d: *mut u8, n: usize) {
            // SAFETY: the caller's contract.
            unsafe { steps::run::<$vec, K, STREAM>(s, d, n) }
        }

        /// Converts `n` elements by step `K` (a 4- or 8-byte source), screening them.
        ///
        /// # Safety
        /// As [`run`].
        #[target_feature(enable = $features)]
        unsafe fn run_screened<K: Step, const STREAM: bool, const FLOAT: bool>(
            s: *const u8,
            d: *mut u8,
            n: usize,
            screen: KeyRun,
        ) -> bool {
            // SAFETY: the caller's contract.
            unsafe { steps::run_screened::<$vec, K, STREAM, FLOAT>(s, d, n, screen) }
        }

        /// The kernel of step `K` (streaming into any destination if `ALWAYS_STREAM`).
        pub(super) fn kernel<K: Step, const ALWAYS_STREAM: bool>(src: &[u8], dst: &mut [u8]) {
            let lanes = <$vec as Vector>::LANES * K::VECTORS;
            super::drive_loops::<K, ALWAYS_STREAM>(
                src,
                dst,
                lanes,
                super::$available(),
                [run::<K, false>, run::<K, true>],
            );
        }

        /// The kernel of step `K` (a 4- or 8-byte source) that screens as it converts, streaming.
        pub(super) fn screened<K: Step>(src: &[u8], dst: &mut [u8], screen: KeyRun) -> bool {
            let lanes = <$vec as Vector>::LANES * K::VECTORS;
            super::super::drive::<K, true>(
                src,
                dst,
                lanes,
                super::$available(),
                true,
                Some(screen),
                |s, d, n, stream| {
                    let (s, d) = (s.as_ptr(), d.as_mut_ptr());
                    // SAFETY: as in `kernel`; the step's source is 4 or 8 bytes (`pick_screened`).
                    unsafe {
                        match (stream, screen.float) {
                            (true, true) => run_screened::<K, true, true>(s, d, n, screen),
                            (true, false) => run_screened::<K, true, false>(s, d, n, screen),
                            // A destination that cannot stream (misaligned elements): the
                            // plain loop, then the scalar screen.
                            (false, _) => {
                                run::<K, false>(s, d, n);
                                let size = <K::S as crate::lanes::Lane>::SIZE;
                                !screen.any_inside(core::slice::from_raw_parts(s, size * n), size)
                            }
                        }
                    }
                },
            )
        }
    };
}

mod avx2;
mod avx2_words;
mod avx512;
mod avx512_words;
mod bytes;

/// A loop of one instruction set over `n` elements (plain or streaming stores), compiled for it.
///
/// # Safety (of a call)
/// The CPU must have the set; `n` elements must fit both buffers; when streaming, the destination
/// must be aligned to 64 bytes.
type Loop = unsafe fn(s: *const u8, d: *mut u8, n: usize);

/// Runs `loops` (`[plain, streaming]`, converting a multiple of `lanes` elements) over what
/// `drive` gives them, when the CPU has their instruction set (`available`).
#[inline(always)]
fn drive_loops<K: Step, const ALWAYS_STREAM: bool>(
    src: &[u8],
    dst: &mut [u8],
    lanes: usize,
    available: bool,
    loops: [Loop; 2],
) {
    super::drive::<K, ALWAYS_STREAM>(src, dst, lanes, available, true, None, |s, d, n, stream| {
        // SAFETY: `drive` calls this only when `available`, with `n` elements that fit both
        // slices and, when streaming, `d` aligned to 64 bytes.
        unsafe { loops[usize::from(stream)](s.as_ptr(), d.as_mut_ptr(), n) };
        true
    });
}

pub(crate) use bytes::{look_up_bytes, looks_up_bytes};

use std::sync::OnceLock;

use super::steps::Step;
use super::words;
use super::Fast;
use crate::lanes::Lane;

/// Whether this CPU has AVX2 and F16C (detected once).
pub(crate) fn avx2_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"))
}

/// Whether this CPU has the AVX-512 subsets the kernels use (detected once).
pub(crate) fn avx512_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq")
    })
}

/// The AVX2 kernel of step `K` (a 4- or 8-byte source) that screens as it converts.
pub(crate) fn avx2_screened<K: Step>() -> Option<super::ScreenedKernel> {
    Some(avx2::screened::<K>)
}

/// The AVX2 kernels of step `K`: on 16-bit lanes (`words`) where its pair narrows bfloat16/float16
/// into a signed narrow float (`words.rs`), else the shared algorithm's on 32-bit lanes. The
/// condition is a constant, so that the kernels a pair does not run are not compiled for it. AVX2
/// has no variable 16-bit shifts (`avx2_words.rs` multiplies instead), so its word lanes gain less
/// than AVX-512's: a few percent over the 32-bit lanes, where AVX-512's gain far more.
pub(crate) fn avx2_kernel<K: Step>() -> Option<Fast> {
    kernels_of!(K, avx2_words, avx2)
}

/// The AVX-512 kernel of step `K` (a 4- or 8-byte source) that screens as it converts.
pub(crate) fn avx512_screened<K: Step>() -> Option<super::ScreenedKernel> {
    Some(avx512::screened::<K>)
}

/// The AVX-512 kernels of step `K` (as [`avx2_kernel`] chooses).
pub(crate) fn avx512_kernel<K: Step>() -> Option<Fast> {
    kernels_of!(K, avx512_words, avx512)
}

/// The kernels of step `$k` from module `$words` (16-bit lanes) where `words::applies` to its
/// pair, else from `$lanes32`: a macro, so that the condition is a constant in the caller and only
/// the chosen module's kernels are compiled.
macro_rules! kernels_of {
    ($k:ty, $words:ident, $lanes32:ident) => {
        Some(
            if const { words::applies(<$k as Step>::S::DTYPE, <$k as Step>::D::DTYPE) } {
                both([$words::kernel::<$k, false>, $words::kernel::<$k, true>])
            } else {
                both([$lanes32::kernel::<$k, false>, $lanes32::kernel::<$k, true>])
            },
        )
    };
}
use kernels_of;

/// `[plain, always streaming]` kernels as a [`Fast`] without a screened one.
fn both([kernel, streaming]: [super::Kernel; 2]) -> Fast {
    Fast {
        kernel,
        streaming,
        screened: None,
    }
}

/// Code that runs faster compiled for a wider instruction set, with no intrinsics of its own
/// (the screens' loops, which LLVM vectorises).
pub(crate) trait Task {
    /// What the task returns.
    type Output;
    /// Does the work; `#[inline(always)]` so that it compiles for the caller's features.
    fn run(self) -> Self::Output;
}

/// `$name(task)`: runs `task` compiled for `$features` when `$available()` says the CPU has
/// them, else as it is.
macro_rules! with_features {
    ($(#[$doc:meta])* $name:ident, $features:literal, $available:ident) => {
        $(#[$doc])*
        pub(crate) fn $name<T: Task>(task: T) -> T::Output {
            #[target_feature(enable = $features)]
            fn run<T: Task>(task: T) -> T::Output {
                task.run()
            }
            if $available() {
                // SAFETY: the CPU has the features (detected above).
                unsafe { run(task) }
            } else {
                task.run()
            }
        }
    };
}

with_features!(
    /// Runs `task` compiled for AVX-512 when the CPU has it, else as it is.
    with_avx512,
    "avx512f,avx512bw,avx512vl,avx512dq",
    avx512_available
);
with_features!(
    /// Runs `task` compiled for AVX2 when the CPU has it, else as it is.
    with_avx2,
    "avx2",
    avx2_available
);

/// How far ahead of the loads the kernels prefetch the source. The hardware prefetchers alone
/// left the compute-heavier kernels (float8) with memory time and compute time adding up rather
/// than overlapping; prefetching every line 4 KiB ahead lifted f32 → float8 from about 0.75 to
/// about 1.0 of memcpy on the 2-core AVX-512 machine, and changed nothing measurable in cache
/// (`dtcast bench`, 2,048 to 16,384 bytes tried; 4,096 was best or tied for every hot pair).
const PREFETCH_AHEAD: usize = 4096;

/// Asks the CPU to bring the `lines` cache lines from [`PREFETCH_AHEAD`] bytes past `p` into
/// cache: a hint, which never faults (past the end of a buffer included) and changes no value.
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8, lines: usize) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for line in 0..lines {
        // SAFETY: a prefetch is a hint (SSE, in every x86-64); it reads nothing and faults on no
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_AHEAD + 64 * line).cast()) };
    }
}

/// Whether [`stream`] streams (SSE2's non-temporal stores are in every x86-64): the portable
/// kernels use it as they use [`prefetch_ahead`], a cache hint of the target's baseline.
pub(crate) const STREAMS: bool = true;

/// Writes `bytes` (a multiple of 16) at `p` with streaming (non-temporal) stores.
///
/// # Safety
/// `p` must be valid for `bytes.len()` bytes of writes and aligned to 16.
#[inline(always)]
pub(crate) unsafe fn stream(p: *mut u8, bytes: &[u8]) {
    use core::arch::x86_64::{_mm_loadu_si128, _mm_stream_si128};
    for (k, chunk) in bytes.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is in every x86-64; the caller's contract for `p`; `chunk` holds 16 bytes.
        unsafe { _mm_stream_si128(p.add(16 * k).cast(), _mm_loadu_si128(chunk.as_ptr().cast())) }
    }
}

/// Orders streaming stores before whatever follows (after a loop of them).
#[inline(always)]
pub(crate) fn store_fence() {
    // SAFETY: `sfence` is SSE, in every x86-64.
    unsafe { core::arch::x86_64::_mm_sfence() }
}
