//! Torch-rounding kernels for the pairs from an integer, bool, float64, complex64 or complex128
//! source into float16, bfloat16, float8_e4m3fn or float8_e5m2 that have no SIMD kernel of their
//! own. Torch converts these through float32 (`c10::Half(float)` and its siblings take a float:
//! float64 and int64 round twice; a complex source gives its real part), and so do the rules
//! (`lanes.rs`): the source's own kernel into a float32 buffer on the stack, then float32's SIMD
//! kernel, give the rules' bytes by construction. On the rules these pairs ran at 0.3–0.6
//! Gelem/s (2 threads, 16M elements), against torch's 1–6.
//!
//! The floating and complex sources into bfloat16 are not among them (float64 → bfloat16 has a
//! SIMD kernel; and float32's kernel writes torch's 0xFFFF for every NaN, a quirk of the float32
//! source alone). Every instruction set but [`Isa::Scalar`] uses these kernels (`plan.rs`).

use dtcast_dtype::{Category, DType};

use crate::dispatch::{convert, pair_fns, Kernel};
use crate::isa::Isa;
use crate::kernels::{select, STREAM_BYTES};
use crate::lanes::{Bool, E4M3Fn, Lane, BF16, C128, C64, E5M2, F16};
use crate::mode::Rounding;

/// Elements per step: the float32 buffer (16 KiB) stays in the first-level cache.
const CHUNK: usize = 4096;

/// Converts `src` into `dst` (whole elements, as many as `dst` holds): `S` → float32 by that
/// pair's best kernel on `Isa::ALL[ISA]`, then float32 → `D` by its SIMD kernel, with streaming
/// stores when `STREAM` or when `dst` is large (as the SIMD kernels decide for themselves).
fn run<S: Lane, D: Lane, const ISA: usize, const STREAM: bool>(src: &[u8], dst: &mut [u8]) {
    let isa = Isa::ALL[ISA];
    let (Some(fns), Some(second)) = (
        pair_fns(S::DTYPE, DType::Float32),
        select(isa, DType::Float32, D::DTYPE, Rounding::Torch),
    ) else {
        // (`kernels` offers this kernel only where both exist.)
        return convert::<S, D, false>(src, dst);
    };
    // The pair's SIMD kernel, else its typed loop (`plain.rs`), else the rules (which LLVM
    // vectorises for 2- to 8-byte integers into float32).
    let first = select(isa, S::DTYPE, DType::Float32, Rounding::Torch)
        .map(|f| f.kernel)
        .or(fns.faster(Rounding::Torch))
        .unwrap_or(fns.torch);
    let second = if STREAM || dst.len() >= STREAM_BYTES {
        second.streaming
    } else {
        second.kernel
    };
    let n = (src.len() / S::SIZE).min(dst.len() / D::SIZE);
    // f32s, so that the float32 side is aligned for the kernels that view it as numbers.
    let mut staged = [0f32; CHUNK];
    let staged: &mut [u8] = bytemuck::cast_slice_mut(&mut staged);
    for (s, d) in src[..n * S::SIZE]
        .chunks(CHUNK * S::SIZE)
        .zip(dst[..n * D::SIZE].chunks_mut(CHUNK * D::SIZE))
    {
        let k = s.len() / S::SIZE;
        first(s, &mut staged[..4 * k]);
        second(&staged[..4 * k], d);
    }
}

/// `run` of one pair on the instruction set `$isa`: the kernel, and the one that always streams.
macro_rules! by_isa {
    ($isa:expr, $src:ty, $dst:ty) => {
        match $isa {
            Isa::Scalar => None,
            Isa::Portable => Some((
                run::<$src, $dst, 1, false> as Kernel,
                run::<$src, $dst, 1, true> as Kernel,
            )),
            Isa::Avx2 => Some((
                run::<$src, $dst, 2, false> as Kernel,
                run::<$src, $dst, 2, true> as Kernel,
            )),
            Isa::Avx512 => Some((
                run::<$src, $dst, 3, false> as Kernel,
                run::<$src, $dst, 3, true> as Kernel,
            )),
        }
    };
}

macro_rules! by_destination {
    ($to:expr, $isa:expr, $src:ty) => {
        match $to {
            DType::Float16 => by_isa!($isa, $src, F16),
            DType::BFloat16 => by_isa!($isa, $src, BF16),
            DType::Float8E4M3Fn => by_isa!($isa, $src, E4M3Fn),
            DType::Float8E5M2 => by_isa!($isa, $src, E5M2),
            _ => None,
        }
    };
}

/// The kernels of `from` → `to` in Torch rounding on `isa` — the one that streams into large
/// destinations, and the one that always streams — where the pair goes through float32 here.
pub(crate) fn kernels(from: DType, to: DType, isa: Isa) -> Option<(Kernel, Kernel)> {
    select(isa, DType::Float32, to, Rounding::Torch)?;
    // float32's bfloat16 kernel writes its own NaN (`Quirks::f32_to_bf16_nan`), which a float64
    // or complex source's NaN would wrongly take on.
    let nan_bf16 =
        to == DType::BFloat16 && matches!(from.category(), Category::Floating | Category::Complex);
    if nan_bf16 || !isa.is_available() {
        return None;
    }
    match from {
        DType::Bool => by_destination!(to, isa, Bool),
        DType::UInt8 => by_destination!(to, isa, u8),
        DType::Int8 => by_destination!(to, isa, i8),
        DType::Int16 => by_destination!(to, isa, i16),
        DType::Int32 => by_destination!(to, isa, i32),
        DType::Int64 => by_destination!(to, isa, i64),
        DType::UInt16 => by_destination!(to, isa, u16),
        DType::UInt32 => by_destination!(to, isa, u32),
        DType::UInt64 => by_destination!(to, isa, u64),
        DType::Float64 => by_destination!(to, isa, f64),
        DType::Complex64 => by_destination!(to, isa, C64),
        DType::Complex128 => by_destination!(to, isa, C128),
        _ => None,
    }
}
