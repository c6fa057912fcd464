//! Streaming stores wherever a destination starts: the one-pass dequantizers (and the float4
//! quantizer, four steps to a vector) produce 64-byte vectors in order; [`Lines`] re-cuts them
//! into whole aligned cache lines (one two-register permute per line) and sends those with
//! streaming stores, so the output skips the read-for-ownership of ordinary stores even when the
//! caller's buffer is not 64-byte aligned (a heap buffer usually starts 16 bytes past a line).
//! The partial lines at either end get masked ordinary stores, which never overlap the streamed
//! lines.

use core::arch::x86_64::*;

/// A run of 64-byte vectors written at consecutive addresses from `base`.
pub(crate) struct Lines {
    base: *mut u8,
    /// 32-bit lanes of a vector that fall before the first line boundary (0: aligned).
    head: u32,
    /// Lane `i` of a line is lane `i + head` of the two vectors it straddles.
    straddle: __m512i,
    prev: __m512i,
    written: usize,
}

impl Lines {
    /// Writes at `base`.
    ///
    /// # Safety
    /// The CPU runs AVX-512 F; every vector pushed must have its 64 bytes inside the
    /// destination, and the caller calls [`finish`](Lines::finish) and then fences
    /// (`_mm_sfence`) before the output is read elsewhere.
    #[inline(always)]
    pub(crate) unsafe fn new(base: *mut u8) -> Lines {
        let off = base as usize % 64;
        // A start that is not on a 32-bit lane cannot be re-cut by lanes: ordinary stores.
        let head = if off.is_multiple_of(4) {
            ((64 - off) % 64 / 4) as u32
        } else {
            u32::MAX
        };
        // SAFETY: AVX-512 F by the caller's contract.
        unsafe {
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            Lines {
                base,
                head,
                straddle: _mm512_add_epi32(lanes, _mm512_set1_epi32(head as i32)),
                prev: _mm512_setzero_si512(),
                written: 0,
            }
        }
    }

    /// Writes the next vector.
    ///
    /// # Safety
    /// As [`new`](Lines::new).
    #[inline(always)]
    pub(crate) unsafe fn push(&mut self, v: __m512i) {
        // SAFETY: the caller's contract: the vector's bytes are inside the destination; a line
        // written here lies inside the previous vector and this one.
        unsafe {
            let at = self.base.add(64 * self.written);
            match self.head {
                0 => _mm512_stream_si512(at.cast(), v),
                // (A plain unaligned write, not the intrinsic: in a large loop the inliner may
                // leave `_mm512_storeu_si512` out of line, a call per vector.)
                u32::MAX => at.cast::<__m512i>().write_unaligned(v),
                head => {
                    if self.written == 0 {
                        // The partial line before the first boundary.
                        let below = (1u16 << head) - 1;
                        _mm512_mask_storeu_epi32(at.cast(), below, v);
                    } else {
                        let line = _mm512_permutex2var_epi32(self.prev, self.straddle, v);
                        let boundary = at.sub(64 - 4 * head as usize);
                        _mm512_stream_si512(boundary.cast(), line);
                    }
                    self.prev = v;
                }
            }
            self.written += 1;
        }
    }

    /// Writes what is left of the last vector (the partial line after the last boundary).
    ///
    /// # Safety
    /// As [`new`](Lines::new).
    #[inline(always)]
    pub(crate) unsafe fn finish(self) {
        if self.written > 0 && !matches!(self.head, 0 | u32::MAX) {
            let from = !((1u16 << self.head) - 1);
            // SAFETY: the last vector's bytes are inside the destination (the caller's
            // contract); the masked lanes are those no line has written.
            unsafe {
                let at = self.base.add(64 * (self.written - 1));
                _mm512_mask_storeu_epi32(at.cast(), from, self.prev);
            }
        }
    }
}
