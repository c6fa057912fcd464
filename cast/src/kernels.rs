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

/// Defines a safe kernel `$name` for `$S` → `$D` for one x86 backend: a SIMD loop, compiled with
/// `$features`, over `$lanes` elements at a time (`$body` sees a raw pointer `$s` to the current
/// source lanes and returns the vector to store), inside [`drive`], which handles the alignment
/// prologue for streaming stores and the scalar tail. The whole loop is inside the
/// `#[target_feature]` function, so the body inlines.
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
macro_rules! simd_kernel {
    ($features:literal, $name:ident: $S:ty => $D:ty, saturate = $sat:literal, lanes = $lanes:literal, |$s:ident| $body:block) => {
        fn $name(src: &[u8], dst: &mut [u8]) {
            use $crate::kernels::Vector as _;
            use $crate::lanes::Lane as _;
            /// # Safety
            /// The CPU must have `$features`; `n` elements must fit both buffers.
            #[target_feature(enable = $features)]
            unsafe fn simd<const STREAM: bool>(src: &[u8], dst: &mut [u8], n: usize) {
                let (sp, dp) = (src.as_ptr(), dst.as_mut_ptr());
                let mut i = 0;
                while i < n {
                    // SAFETY: i + $lanes <= n, so the $lanes elements at i lie inside both buffers;
                    // loads are unaligned; a streaming store is aligned (the caller aligned `dst`
                    // to 64 bytes and every store is a power of two no wider than that).
                    unsafe {
                        let $s = sp.add(i * <$S>::SIZE);
                        // Every source cache line, a few KiB early.
                        $crate::kernels::prefetch_ahead($s, ($lanes * <$S>::SIZE).div_ceil(64));
                        let d = dp.add(i * <$D>::SIZE);
                        let v = $body;
                        if STREAM {
                            v.stream(d)
                        } else {
                            v.store(d)
                        }
                    }
                    i += $lanes;
                }
                if STREAM {
                    core::arch::x86_64::_mm_sfence();
                }
            }
            $crate::kernels::drive::<$S, $D, $sat>(
                src,
                dst,
                $lanes,
                available(),
                |s, d, n, stream| {
                    // SAFETY: `drive` calls this only when the CPU features were detected, with `n`
                    // elements that fit both slices and, when streaming, `d` aligned to 64 bytes.
                    unsafe {
                        if stream {
                            simd::<true>(s, d, n)
                        } else {
                            simd::<false>(s, d, n)
                        }
                    }
                },
            );
        }
    };
}

/// A vector a kernel stores: ordinary (unaligned) or streaming (aligned) stores.
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
trait Vector: Copy {
    /// # Safety
    /// `p` must be valid for `size_of::<Self>()` bytes of writes; the CPU must support the type.
    unsafe fn store(self, p: *mut u8);
    /// # Safety
    /// As `store`, and `p` must be aligned to `size_of::<Self>()`.
    unsafe fn stream(self, p: *mut u8);
}

#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
macro_rules! vector {
    ($features:literal, $ty:ty, $store:ident, $stream:ident, $as:ty) => {
        impl Vector for $ty {
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn store(self, p: *mut u8) {
                // SAFETY: the caller's contract.
                unsafe { core::arch::x86_64::$store(p.cast::<$as>(), self) }
            }
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn stream(self, p: *mut u8) {
                // SAFETY: the caller's contract.
                unsafe { core::arch::x86_64::$stream(p.cast::<$as>(), self) }
            }
        }
    };
}

#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod vectors {
    use super::Vector;
    use core::arch::x86_64::{__m128i, __m256i, __m512, __m512d, __m512i};
    vector!("sse2", __m128i, _mm_storeu_si128, _mm_stream_si128, __m128i);
    vector!(
        "avx",
        __m256i,
        _mm256_storeu_si256,
        _mm256_stream_si256,
        __m256i
    );
    vector!(
        "avx512f",
        __m512i,
        _mm512_storeu_si512,
        _mm512_stream_si512,
        __m512i
    );
    vector!("avx512f", __m512, _mm512_storeu_ps, _mm512_stream_ps, f32);
    vector!("avx512f", __m512d, _mm512_storeu_pd, _mm512_stream_pd, f64);
}

#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod x86_avx2;
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
mod x86_avx512;

/// Asks the CPU to bring the `lines` cache lines from [`PREFETCH_AHEAD`] bytes past `p` into
/// cache: a hint, which never faults (past the end of a buffer included) and changes no value;
/// nothing at all off x86-64.
#[inline(always)]
pub(crate) fn prefetch_ahead(p: *const u8, lines: usize) {
    #[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
    for line in 0..lines {
        // SAFETY: a prefetch is a hint; it reads nothing and faults on no address.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                p.wrapping_add(PREFETCH_AHEAD + 64 * line).cast(),
            )
        };
    }
    #[cfg(not(all(target_arch = "x86_64", not(dtcast_backend = "scalar"))))]
    let _ = (p, lines);
}

/// A set of fast kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// No fast paths: the scalar kernels (always available).
    Scalar,
    /// x86-64 AVX2 + F16C: every hot pair.
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
    // Asked once per screened block, so detected once.
    static BEST: std::sync::OnceLock<Backend> = std::sync::OnceLock::new();
    *BEST.get_or_init(|| backends().last().copied().unwrap_or(Backend::Scalar))
}

/// Destinations from this size on are written with streaming (non-temporal) stores: a cast writes
/// a buffer it will not read back, and streaming stores skip the read-for-ownership that ordinary
/// stores cost, which matters most for widening pairs.
#[cfg(all(target_arch = "x86_64", not(dtcast_backend = "scalar")))]
const STREAM_BYTES: usize = 1 << 20;

/// How far ahead of the loads the kernels prefetch the source. The hardware prefetchers alone
/// left the compute-heavier kernels (float8) with memory time and compute time adding up rather
/// than overlapping; prefetching every line 4 KiB ahead lifted f32 → float8 from about 0.75 to
/// about 1.0 of memcpy on the 2-core AVX-512 machine, and changed nothing measurable in cache
/// (`dtcast bench`, 2,048 to 16,384 bytes tried; 4,096 was best or tied for every hot pair).
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_backend = "scalar"))),
    allow(dead_code)
)]
const PREFETCH_AHEAD: usize = 4096;

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
