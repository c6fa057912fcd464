//! The loops of quantizing and dequantizing are plain Rust that LLVM vectorises; this compiles
//! them for the instruction set `dtcast_cast` chose for its casts ([`dtcast_cast::isa`]), so that
//! they run as wide as the casts around them (baseline x86-64 is SSE2: four lanes).

/// `work()` compiled for the best instruction set this CPU runs, as `dtcast_cast` chose it: the
/// closure is inlined into a function with that set's target features, and the loops of the
/// `#[inline(always)]` functions it calls are vectorised for it.
#[inline(always)]
pub(crate) fn with_best_isa<R>(work: impl FnOnce() -> R) -> R {
    // `Isa` is non-exhaustive: a set added later runs the baseline build until it is named here.
    #[cfg(target_arch = "x86_64")]
    {
        let isa = dtcast_cast::isa();
        if isa == dtcast_cast::Isa::Avx512 {
            // SAFETY: `isa()` names a set only when this CPU runs it.
            return unsafe { x86::avx512(work) };
        }
        if isa == dtcast_cast::Isa::Avx2 {
            // SAFETY: as above.
            return unsafe { x86::avx2(work) };
        }
    }
    work()
}

/// Asks for every cache line of `bytes` to be brought into the cache, without waiting for it
/// (where the target has a stable prefetch instruction: x86-64; elsewhere nothing).
#[inline(always)]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86-64; a prefetch reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// How far past the bytes a one-pass loop is reading it asks for its input ([`prefetch_ahead`]).
///
/// Quantizing a tensor larger than the cache reads each element from memory once, and a core's
/// own reads alone keep too few lines in flight to cover memory's latency: the hardware
/// prefetchers did not hide it: asking 8 KiB ahead made the AVX-512 float4 quantizers much
/// faster (no better at 16 KiB). With AVX2 the same loops are bound by their arithmetic and did
/// not change, nor did dequantizing (which reads a quarter or half of what it writes) when its
/// loops prefetched.
// (The prefetching loops are x86-64's.)
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) const AHEAD: usize = 8 << 10;

/// Asks for the cache line [`AHEAD`] bytes past `p`, without waiting for it (x86-64; elsewhere
/// nothing). A loop reading one 64-byte line per step calls it once a step. A prefetch never
/// faults, so near the end of a buffer it only asks for a line nobody reads.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn prefetch_ahead(p: *const u8) {
    prefetch_line(p.wrapping_add(AHEAD));
}

/// Asks for the cache line at `p`, without waiting for it (x86-64; elsewhere nothing). The
/// address is only computed, never dereferenced, and a prefetch never faults.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of x86-64; a prefetch reads nothing and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Where a loop that reads `src` a line at a time prefetches: line `i` of the result with line
/// `i` of `src`. That is `next` where the caller reads it after `src` (a thread's next band of
/// rows, while `src` itself is in the core's cache already: its maxima were just found there),
/// so that the next band's reads from memory overlap this band's arithmetic; else [`AHEAD`]
/// bytes past each line of `src`.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn prefetch_base(src: &[u8], next: &[u8]) -> *const u8 {
    if next.is_empty() {
        src.as_ptr().wrapping_add(AHEAD)
    } else {
        next.as_ptr()
    }
}

#[cfg(target_arch = "x86_64")]
use crate::x86::simd as x86;
