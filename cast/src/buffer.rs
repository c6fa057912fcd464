//! Fresh output buffers, the kind every allocating cast returns (`cast_to_vec`, `Tensor::to`, a
//! candle tensor's `to_dtype`, a dequantized weight).
//!
//! A large fresh buffer costs more to get than to fill: the allocator maps new memory for it
//! (glibc: from 32 MiB up always, below that whenever a block of its size was freed to the
//! system), and the first write to each 4 KiB page faults and has the kernel clear that page —
//! 16,384 faults for 64 MiB. So the buffers here are
//! - zeroed by the allocator ([`zeroed_vec`]: `calloc`, which does not clear memory it has just
//!   mapped, where `vec.resize(n, 0)` would write every byte once more, on one thread), and
//! - on Linux, from 4 MiB up, marked for transparent huge pages (`madvise(MADV_HUGEPAGE)`,
//!   [`prefer_huge_pages`]): each fault then maps and clears a 2 MiB page. Kernels set to
//!   `madvise` mode (the usual default) or `always` honour it; `never` ignores it.
//!
//! A fresh buffer of tens of MiB written once takes a fraction of the time on huge pages: most of
//! its cost with 4 KiB pages is the faults.

/// Buffers from here up are marked for huge pages: big enough to hold whole 2 MiB pages after
/// aligning their ends inward, and past the sizes a heap reuses (whose pages are there already).
const HUGE_FROM: usize = 4 << 20;

/// `n` zeroed elements of `T` (any type for which all-zero bytes are a value), zeroed by the
/// allocator and, where large, marked for huge pages ([`prefer_huge_pages`]); `None` where the
/// memory cannot be had (instead of aborting).
///
/// ```
/// let v: Vec<u128> = dtcast_cast::zeroed_vec(3).expect("memory");
/// assert_eq!(v, [0, 0, 0]);
/// ```
pub fn zeroed_vec<T: bytemuck::Zeroable>(n: usize) -> Option<Vec<T>> {
    let layout = std::alloc::Layout::array::<T>(n).ok()?;
    if layout.size() == 0 {
        // No elements, or elements of no size: nothing to allocate.
        return Some(std::iter::repeat_with(T::zeroed).take(n).collect());
    }
    // SAFETY: the layout's size is nonzero (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with `T`'s alignment and room for
    // exactly `n` elements (the layout of `[T; n]`), and all of them are initialised: its bytes
    // are zero, a value of `T` (`Zeroable`).
    let mut v = unsafe { Vec::from_raw_parts(ptr, n, n) };
    prefer_huge_pages(&mut v);
    Some(v)
}

/// Asks the kernel to back `buf`'s memory with transparent huge pages where it is large (from
/// 4 MiB; the whole 2 MiB pages inside it), so that writing it for the first time faults once
/// per 2 MiB instead of once per 4 KiB. Advice only: memory already mapped stays as it is, and
/// elsewhere than Linux, or where the kernel has huge pages off, nothing changes. Call it before
/// the first write to a fresh buffer (uninitialised memory included).
pub fn prefer_huge_pages<T>(buf: &mut [T]) {
    let len = std::mem::size_of_val(buf);
    if len < HUGE_FROM {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (buf.as_mut_ptr() as usize).next_multiple_of(HUGE);
        let end = (buf.as_mut_ptr() as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside `buf`, memory this caller holds exclusively, and
            // MADV_HUGEPAGE changes how its pages are backed, never their contents. A kernel
            // without huge pages answers EINVAL, which leaves everything as it was.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}
