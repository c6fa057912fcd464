//! Torch-rounding kernels for the pairs from an integer, bool, float64, complex64 or complex128
//! source into float16, bfloat16, float8_e4m3fn or float8_e5m2 that have no SIMD kernel of their
//! own. Torch converts these through float32 (`c10::Half(float)` and its siblings take a float:
//! float64 and int64 round twice; a complex source gives its real part), and so do the rules
//! (`lanes.rs`): the source's own kernel into a float32 buffer on the stack, then float32's SIMD
//! kernel, give the rules' bytes by construction. On the rules these pairs ran several times
//! slower than torch.
//!
//! The floating and complex sources into bfloat16 are not among them (float64 → bfloat16 has a
//! SIMD kernel; and float32's kernel writes torch's 0xFFFF for every NaN, a quirk of the float32
//! source alone). Every instruction set but [`Isa::Scalar`] uses these kernels (`plan.rs`).
//!
//! The other way, a float16 or bfloat16 source into bool, an integer, float64 or a complex type
//! goes up through float32 ([`up_kernels`], the pairs of [`goes_up`]): the source's SIMD kernel
//! into float32 (exact), then float32's SIMD kernel or typed loop (`plain.rs`, compiled here for
//! the instruction set's features) in the cast's rounding. The rules convert these pairs from the
//! value, which float32 holds exactly, and the float32 kernel of Saturate rounding keeps a NaN's
//! payload as the rules' float64 and complex destinations do (the Torch kernel writes float16
//! NaNs as torch's float32 NaN): every 16-bit pattern of both sources gives the rules' bytes this
//! way in both roundings (`tests/cast_simd.rs` tries each one on every instruction set). Before,
//! these pairs were looked up in tables of 65,536 entries (`tables.rs`), one entry at a time.

use std::marker::PhantomData;

use dtcast_dtype::{Category, DType};

use crate::dispatch::{convert, pair_fns, Kernel};
use crate::isa::Isa;
use crate::kernels::{select, with_isa, Fast, Task, STREAM_BYTES};
use crate::lanes::{Bool, E4M3Fn, Lane, BF16, C128, C64, E5M2, F16};
use crate::mode::Rounding;
use crate::plain::{self, Typed};

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
    let second = streaming_if(second, STREAM, dst.len());
    in_steps((src, S::SIZE), (dst, D::SIZE), first, second);
}

/// Float32's SIMD kernel `f` for the second step into a destination of `dst_len` bytes: the
/// one that always streams when `stream` or when the destination is large (each step writes a
/// chunk too small for the kernel to stream by itself), else the plain one.
fn streaming_if(f: Fast, stream: bool, dst_len: usize) -> Kernel {
    if stream || dst_len >= STREAM_BYTES {
        f.streaming
    } else {
        f.kernel
    }
}

/// `first` (a source of `S` bytes an element → float32) into a float32 buffer in the first-level
/// cache, then `second` (float32 → a destination of `D` bytes), [`CHUNK`] elements at a time:
/// whole elements, as many as `dst` holds.
#[inline(always)]
fn in_steps(
    (src, s): (&[u8], usize),
    (dst, d): (&mut [u8], usize),
    first: Kernel,
    second: impl Fn(&[u8], &mut [u8]),
) {
    let n = (src.len() / s).min(dst.len() / d);
    // f32s, so that the float32 side is aligned for the kernels that view it as numbers.
    let mut staged = [0f32; CHUNK];
    let staged: &mut [u8] = bytemuck::cast_slice_mut(&mut staged);
    for (s_chunk, d_chunk) in src[..n * s]
        .chunks(CHUNK * s)
        .zip(dst[..n * d].chunks_mut(CHUNK * d))
    {
        let k = s_chunk.len() / s;
        first(s_chunk, &mut staged[..4 * k]);
        second(&staged[..4 * k], d_chunk);
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

/// Converts `src` into `dst` (whole elements, as many as `dst` holds) up through float32: `S`
/// (float16 or bfloat16) → float32 by its SIMD kernel on `Isa::ALL[ISA]` in Saturate rounding
/// (exact; NaN payloads kept), then float32 → `D` in the cast's rounding by its SIMD kernel
/// (streaming stores when `STREAM` or when `dst` is large), else by its typed loop compiled for
/// that set's features.
fn up<S: Lane, D: Typed, const ISA: usize, const STREAM: bool, const SATURATE: bool>(
    src: &[u8],
    dst: &mut [u8],
) {
    let isa = Isa::ALL[ISA];
    let rounding = if SATURATE {
        Rounding::Saturate
    } else {
        Rounding::Torch
    };
    let Some(first) = select(isa, S::DTYPE, DType::Float32, Rounding::Saturate) else {
        // (`up_kernels` offers this kernel only where the first step exists.)
        return convert::<S, D, SATURATE>(src, dst);
    };
    match select(isa, DType::Float32, D::DTYPE, rounding) {
        Some(second) => {
            let second = streaming_if(second, STREAM, dst.len());
            in_steps((src, S::SIZE), (dst, D::SIZE), first.kernel, second);
        }
        None => with_isa(
            isa,
            Up::<D, SATURATE> {
                src: (src, S::SIZE),
                dst,
                first: first.kernel,
                destination: PhantomData,
            },
        ),
    }
}

/// [`up`]'s steps where float32 → `D` is a typed loop, as a task that [`with_isa`] compiles for an
/// instruction set.
struct Up<'a, D, const SATURATE: bool> {
    src: (&'a [u8], usize),
    dst: &'a mut [u8],
    first: Kernel,
    destination: PhantomData<D>,
}

impl<D: Typed, const SATURATE: bool> Task for Up<'_, D, SATURATE> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let second = plain::from_f32::<D, SATURATE>;
        in_steps(self.src, (self.dst, D::SIZE), self.first, second);
    }
}

/// `up` of one pair on the instruction set `$isa`: Torch and Saturate rounding, each as the
/// kernel and the one that always streams.
macro_rules! up_by_isa {
    ($isa:expr, $src:ty, $dst:ty) => {
        match $isa {
            Isa::Scalar => None,
            Isa::Portable => up_pair::<$src, $dst, 1>(),
            Isa::Avx2 => up_pair::<$src, $dst, 2>(),
            Isa::Avx512 => up_pair::<$src, $dst, 3>(),
        }
    };
}

/// `up`'s four instantiations of a pair on `Isa::ALL[ISA]` (`[torch, saturate]`, each `(kernel,
/// streaming)`), compiled only for the pairs that go up ([`goes_up`]).
fn up_pair<S: Lane, D: Typed, const ISA: usize>() -> Option<[(Kernel, Kernel); 2]> {
    if const { !goes_up(S::DTYPE, D::DTYPE) } {
        return None;
    }
    Some([
        (up::<S, D, ISA, false, false>, up::<S, D, ISA, true, false>),
        (up::<S, D, ISA, false, true>, up::<S, D, ISA, true, true>),
    ])
}

macro_rules! up_by_destination {
    ($to:expr, $isa:expr, $src:ty) => {
        match $to {
            DType::Bool => up_by_isa!($isa, $src, Bool),
            DType::UInt8 => up_by_isa!($isa, $src, u8),
            DType::Int8 => up_by_isa!($isa, $src, i8),
            DType::Int16 => up_by_isa!($isa, $src, i16),
            DType::Int32 => up_by_isa!($isa, $src, i32),
            DType::Int64 => up_by_isa!($isa, $src, i64),
            DType::UInt16 => up_by_isa!($isa, $src, u16),
            DType::UInt32 => up_by_isa!($isa, $src, u32),
            DType::UInt64 => up_by_isa!($isa, $src, u64),
            DType::Float64 => up_by_isa!($isa, $src, f64),
            DType::Complex64 => up_by_isa!($isa, $src, C64),
            DType::Complex128 => up_by_isa!($isa, $src, C128),
            _ => None,
        }
    };
}

/// The kernels of `from` → `to` in `rounding` on `isa` — the one that streams into large
/// destinations, and the one that always streams — where the pair goes up through float32: from
/// float16 or bfloat16 into bool, an integer, float64 or a complex type.
pub(crate) fn up_kernels(
    from: DType,
    to: DType,
    rounding: Rounding,
    isa: Isa,
) -> Option<(Kernel, Kernel)> {
    if !isa.is_available() {
        return None;
    }
    let pair = match from {
        DType::Float16 => up_by_destination!(to, isa, F16),
        DType::BFloat16 => up_by_destination!(to, isa, BF16),
        _ => None,
    }?;
    Some(match rounding {
        Rounding::Torch => pair[0],
        Rounding::Saturate => pair[1],
    })
}

/// Whether `from` → `to` goes up through float32 ([`up_kernels`]) where it has no SIMD kernel:
/// float16 into bool, the integers, float64 and the complex types, whose tables (`tables.rs`) are
/// read one entry at a time, and bfloat16 where float32's side is a SIMD kernel (uint8, int32,
/// float64) or a loop that beat bfloat16's own (complex64): faster than the tables on every one
/// of these pairs (into int8 with float32's loop by blocks, `plain::through_i32`). bfloat16's
/// typed loops into int8, int16, uint16, int64, uint32 and uint64 (`plain.rs`) take the value
/// from the bits themselves and stay; into bool its rule (a compare) is faster still.
pub(crate) const fn goes_up(from: DType, to: DType) -> bool {
    use DType::*;
    matches!(
        (from, to),
        (
            Float16,
            Bool | UInt8 | Int8 | Int16 | UInt16 | Int32 | Int64 | UInt32 | UInt64
        ) | (Float16, Float64 | Complex64 | Complex128)
            | (BFloat16, UInt8 | Int32 | Float64 | Complex64)
    )
}
