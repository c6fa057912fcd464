//! How casts split across rayon's pool: when, into what pieces, and which error is reported.

use crate::error::CastError;

/// Elements below which a cast stays on the calling thread.
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 16;
/// Elements per task when a cast is split across threads.
pub(crate) const CHUNK_ELEMENTS: usize = 1 << 15;

/// Elements per piece when `n` are split across the pool: a few long contiguous pieces per thread,
/// not many short ones — each core then streams through its own memory, which the hardware
/// prefetchers follow (faster than 32K-element tasks for widening pairs on 2 cores).
/// A multiple of 64, so that every piece of a packed buffer starts on a byte (and of a float4
/// buffer on a 32-byte boundary when the whole does).
pub(crate) fn pieces(n: usize) -> usize {
    let pieces = rayon::current_num_threads() * 4;
    n.div_ceil(pieces).max(CHUNK_ELEMENTS).next_multiple_of(64)
}

/// The element an error names (`usize::MAX` for errors about the whole buffer), to find the first.
pub(crate) fn first_index(e: &CastError) -> usize {
    match e {
        CastError::Value { index, .. } => *index,
        _ => usize::MAX,
    }
}
