//! The SIMD kernels of the hot pairs: each algorithm written once (`steps.rs`) over a small
//! [`Vector`](vector::Vector) trait, instantiated per instruction set — portable Rust
//! (`portable.rs`), and on x86-64 AVX2 and AVX-512 (`x86/`). Which pairs have kernels is one
//! table, [`FAST`]; which instruction set runs them is an [`Isa`] value the caller passes down.
//!
//! Every fast kernel gives the same bytes as the scalar rules (`lanes.rs`) for every input — the
//! property tests compare them on random bit patterns, NaN payloads, subnormals and out-of-range
//! values included, for every instruction set the machine has.

mod ml_steps;
mod portable;
mod steps;
mod vector;
#[cfg_attr(
    not(all(target_arch = "x86_64", not(dtcast_isa = "portable"))),
    path = "x86_absent.rs"
)]
mod x86;

use dtcast_dtype::DType;

pub(crate) use x86::{avx2_available, avx512_available, prefetch_ahead, with_avx512, Task};

use crate::dispatch::Kernel;
use crate::isa::Isa;
use crate::mode::Rounding;
use ml_steps::*;
use steps::*;

/// The fast kernels for one rounding on one instruction set (`None` where the set is not built).
pub(crate) type Pick = fn(Isa, Rounding) -> Option<Fast>;

/// A pair's SIMD kernel on one instruction set, twice: streaming stores for large destinations
/// only (`kernel`), or for any destination (`streaming`: for callers that write a large
/// destination a block at a time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fast {
    pub(crate) kernel: Kernel,
    pub(crate) streaming: Kernel,
}

/// The pairs of torch's dtypes with SIMD kernels, in the order `dtcast bench` lists them, with
/// their steps in Torch and Saturate rounding.
const BASIC: [(DType, DType, Pick); 18] = {
    use DType::*;
    [
        (Float32, BFloat16, pick::<F32ToBf16<false>, F32ToBf16<true>>),
        (BFloat16, Float32, pick::<Bf16ToF32<false>, Bf16ToF32<true>>),
        (Float32, Float16, pick::<F32ToF16<false>, F32ToF16<true>>),
        (Float16, Float32, pick::<F16ToF32<false>, F16ToF32<true>>),
        (Float64, Float32, pick::<F64ToF32<false>, F64ToF32<true>>),
        (Float32, Float64, pick::<F32ToF64<false>, F32ToF64<true>>),
        (Float64, BFloat16, pick::<F64ToBf16<false>, F64ToBf16<true>>),
        (Float32, Int32, pick::<F32ToI32<false>, F32ToI32<true>>),
        (Int32, Float32, pick::<I32ToF32<false>, I32ToF32<true>>),
        (Int64, Int32, pick::<I64ToI32<false>, I64ToI32<true>>),
        (UInt8, Float32, pick::<U8ToF32<false>, U8ToF32<true>>),
        (Float32, UInt8, pick::<F32ToU8<false>, F32ToU8<true>>),
        (
            Float32,
            Float8E4M3Fn,
            pick::<F32ToE4M3Fn<false>, F32ToE4M3Fn<true>>,
        ),
        (
            Float32,
            Float8E5M2,
            pick::<F32ToE5M2<false>, F32ToE5M2<true>>,
        ),
        (Bool, Float32, pick::<BoolToF32<false>, BoolToF32<true>>),
        (Int32, Int64, pick::<I32ToI64<false>, I32ToI64<true>>),
        (Float16, BFloat16, pick::<F16ToBf16<false>, F16ToBf16<true>>),
        (BFloat16, Float16, pick::<Bf16ToF16<false>, Bf16ToF16<true>>),
    ]
};

/// Every pair with SIMD kernels: [`BASIC`], then ml_dtypes' formats ([`ML_FAST`], next to their
/// steps).
const FAST: [(DType, DType, Pick); BASIC.len() + ML_FAST.len()] = {
    let mut all = [BASIC[0]; BASIC.len() + ML_FAST.len()];
    let mut i = 0;
    while i < all.len() {
        all[i] = if i < BASIC.len() {
            BASIC[i]
        } else {
            ML_FAST[i - BASIC.len()]
        };
        i += 1;
    }
    all
};

/// The pairs that have SIMD kernels ([`hot_pairs`](crate::hot_pairs)).
pub(crate) const FAST_PAIRS: [(DType, DType); FAST.len()] = {
    let mut pairs = [(DType::Bool, DType::Bool); FAST.len()];
    let mut i = 0;
    while i < FAST.len() {
        pairs[i] = (FAST[i].0, FAST[i].1);
        i += 1;
    }
    pairs
};

pub(crate) fn pick<T: Step, U: Step>(isa: Isa, rounding: Rounding) -> Option<Fast> {
    match rounding {
        Rounding::Torch => instantiate::<T>(isa),
        Rounding::Saturate => instantiate::<U>(isa),
    }
}

/// Step `K` compiled for `isa`.
fn instantiate<K: Step>(isa: Isa) -> Option<Fast> {
    match isa {
        Isa::Scalar => None,
        Isa::Portable => Some(Fast {
            kernel: portable::kernel::<K, false>,
            streaming: portable::kernel::<K, true>,
        }),
        Isa::Avx2 => x86::avx2_kernel::<K>(),
        Isa::Avx512 => x86::avx512_kernel::<K>(),
    }
}

/// The fast kernel of `isa` for a pair and rounding, if the pair has one and the CPU runs `isa`.
pub(crate) fn select(isa: Isa, from: DType, to: DType, rounding: Rounding) -> Option<Fast> {
    if !isa.is_available() {
        return None;
    }
    let (_, _, pick) = FAST.iter().find(|(f, t, _)| (*f, *t) == (from, to))?;
    pick(isa, rounding)
}

/// Destinations from this size on are written with streaming (non-temporal) stores where the
/// instruction set has them: a cast writes a buffer it will not read back, and streaming stores
/// skip the read-for-ownership that ordinary stores cost, which matters most for widening pairs.
pub(crate) const STREAM_BYTES: usize = 1 << 20;

/// Runs a SIMD loop over `src` → `dst` the way every instruction set does: when `available`,
/// destinations of [`STREAM_BYTES`] and more (any, if `ALWAYS_STREAM`) first get a few scalar
/// elements so that the destination pointer is 64-byte aligned where the set `streams`, then
/// `simd(src, dst, n, stream)` converts `n` elements (a multiple of `lanes`); the scalar kernel
/// converts whatever is left. Offsets are counted in bits, so that packed sides (4 or 6 bits an
/// element) fit: the buffers hold whole elements, and every split falls on a byte of both.
#[inline(always)]
fn drive<K: Step, const ALWAYS_STREAM: bool>(
    src: &[u8],
    dst: &mut [u8],
    lanes: usize,
    available: bool,
    streams: bool,
    simd: impl FnOnce(&[u8], &mut [u8], usize, bool),
) {
    use crate::lanes::Lane;
    let scalar = if K::SATURATE {
        crate::dispatch::convert_stored::<K::S, K::D, true>
    } else {
        crate::dispatch::convert_stored::<K::S, K::D, false>
    };
    let (sb, db) = (K::S::DTYPE.bits(), K::D::DTYPE.bits());
    let n = (src.len() * 8 / sb).min(dst.len() * 8 / db);
    let mut done = 0;
    if available {
        // The elements up to the destination's next 64-byte boundary, where that boundary falls
        // between elements of both buffers.
        let gap = (64 - (dst.as_ptr() as usize) % 64) % 64;
        let head = gap * 8 / db;
        let stream = streams
            && (ALWAYS_STREAM || dst.len() >= STREAM_BYTES)
            && (gap * 8).is_multiple_of(db)
            && (head * sb).is_multiple_of(8);
        if stream {
            done = head.min(n);
            scalar(&src[..done * sb / 8], &mut dst[..done * db / 8]);
        }
        let full = (n - done) - (n - done) % lanes;
        simd(
            &src[done * sb / 8..],
            &mut dst[done * db / 8..],
            full,
            stream,
        );
        done += full;
    }
    scalar(&src[done * sb / 8..], &mut dst[done * db / 8..]);
}
