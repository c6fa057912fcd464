//! Typed loops for the pairs without SIMD kernels between torch's number dtypes that Rust has as
//! numbers — bool, the integers, float32, float64, complex64 and complex128 (as pairs of floats):
//! the buffers viewed as slices of numbers, and each element converted by the rules themselves
//! ([`dispatch::element`](crate::dispatch)), which inline to a few operations per element
//! (integers wrap or extend, floats truncate as x86's `cvtt` instructions do, a complex number's
//! real part is taken) that LLVM vectorises for the baseline target. The rules' per-element loop
//! reads and writes each element through byte slices, which LLVM vectorises for fewer pairs and
//! less well: these loops are faster than it on nearly every pair (see [`typed`]), where before
//! both (and `rules::cvtt32`'s vectorisable form) pairs such as float32 → int8 ran at a fraction
//! of torch's `copy_`.
//!
//! Where a buffer is not aligned for its element type, or the machine is big-endian, the rules
//! run instead. Every instruction set but [`Isa::Scalar`](crate::isa::Isa) uses these loops
//! (`plan.rs`), as the tables of `tables.rs`.

use std::marker::PhantomData;

use dtcast_dtype::{Category, DType};

use crate::dispatch::{convert, element, Kernel};
use crate::isa::Isa;
use crate::kernels::{with_isa, Task};
use crate::lanes::{Bool, Lane, Quirks, BF16, C128, C64};

/// A lane whose storage is a Rust number, or a pair of them, so that a buffer of it can be viewed
/// as a slice.
pub(crate) trait Typed: Lane {
    /// The storage (bool: its byte; complex: real and imaginary parts).
    type Prim: bytemuck::Pod;
    fn from_prim(p: Self::Prim) -> Self;
    fn into_prim(self) -> Self::Prim;
}

macro_rules! number {
    ($($ty:ty),*) => {$(
        impl Typed for $ty {
            type Prim = $ty;
            #[inline(always)]
            fn from_prim(p: $ty) -> $ty {
                p
            }
            #[inline(always)]
            fn into_prim(self) -> $ty {
                self
            }
        }
    )*};
}
number!(u8, i8, i16, i32, i64, u16, u32, u64, f32, f64);

/// Lanes that wrap one Rust number (bool: its byte; bfloat16: its bits).
macro_rules! wrapper {
    ($($lane:ident of $prim:ty),*) => {$(
        impl Typed for $lane {
            type Prim = $prim;
            #[inline(always)]
            fn from_prim(p: $prim) -> $lane {
                $lane(p)
            }
            #[inline(always)]
            fn into_prim(self) -> $prim {
                self.0
            }
        }
    )*};
}
wrapper!(Bool of u8, BF16 of u16);

macro_rules! complex {
    ($($lane:ident of $part:ty),*) => {$(
        impl Typed for $lane {
            type Prim = [$part; 2];
            #[inline(always)]
            fn from_prim([re, im]: [$part; 2]) -> $lane {
                $lane(re, im)
            }
            #[inline(always)]
            fn into_prim(self) -> [$part; 2] {
                [self.0, self.1]
            }
        }
    )*};
}
complex!(C64 of f32, C128 of f64);

/// Converts `src` into `dst` (whole elements, as many as `dst` holds) by a typed loop where both
/// buffers are aligned for their types on a little-endian machine; else by the rules.
fn kernel<S: Typed, D: Typed, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    typed_loop::<S, D, SATURATE>(src, dst);
}

/// [`kernel`] of float32 → `D`, inlined into its caller (`through.rs`, which compiles it for an
/// instruction set's features).
#[inline(always)]
pub(crate) fn from_f32<D: Typed, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    typed_loop::<f32, D, SATURATE>(src, dst);
}

/// The body of [`kernel`].
#[inline(always)]
fn typed_loop<S: Typed, D: Typed, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    let q = Quirks::of(S::DTYPE, D::DTYPE);
    let typed = (
        bytemuck::try_cast_slice::<u8, S::Prim>(src),
        bytemuck::try_cast_slice_mut::<u8, D::Prim>(dst),
    );
    match typed {
        // `part_bits` pairs (a complex dtype and its part type) copy the real part's bits in
        // Torch rounding: for float32 and float64 parts the rules give those bits too, since
        // they carry the value as it is.
        (Ok(s), Ok(d)) if cfg!(target_endian = "little") => {
            let one = |s: S::Prim| element::<S, D, SATURATE>(S::from_prim(s), q).into_prim();
            if const { !SATURATE && truncates_to_low_bits(S::DTYPE, D::DTYPE) } {
                return through_i32::<S, D>(s, d, one);
            }
            for (d, &s) in d.iter_mut().zip(s) {
                *d = one(s);
            }
        }
        _ => convert::<S, D, SATURATE>(src, dst),
    }
}

/// Whether `from` → `to` is float32 or bfloat16 into an integer that torch truncates to 32 bits
/// (`rules::cvtt32`: int8, int16, uint16) or 64 (`rules::cvtt64`: int64, uint32, uint64) and
/// keeps the low bits of: LLVM vectorises neither rule's range test as written, so these run
/// block by block (AVX-512 or not). float32 → int32 and → uint8 have SIMD kernels.
const fn truncates_to_low_bits(from: DType, to: DType) -> bool {
    use DType::*;
    matches!(from, Float32 | BFloat16)
        && matches!(to, Int8 | Int16 | UInt16 | Int64 | UInt32 | UInt64)
}

/// A float32 or bfloat16 element's value as float32 (exact): the sources that
/// [`truncates_to_low_bits`] admits, the only ones that reach here.
#[inline(always)]
fn widened<S: Typed>(p: S::Prim) -> f32 {
    match S::DTYPE {
        DType::BFloat16 => f32::from_bits(u32::from(bytemuck::cast::<S::Prim, u16>(p)) << 16),
        DType::Float32 => bytemuck::cast::<S::Prim, f32>(p),
        other => unreachable!("{other} does not truncate by blocks (`truncates_to_low_bits`)"),
    }
}

/// Elements per block of [`through_i32`].
const BLOCK: usize = 16;

/// [`typed_loop`] of a pair that [`truncates_to_low_bits`] in Torch rounding (`one`: an element by
/// the rules): a block where every |x| is below 2^31 (nearly every block of real data) truncates
/// to 32 bits, which vectorises, and keeps the low bits of the result's two's complement (sign
/// extended into int64 and uint64): a value in that range truncates to the same integer in 32
/// bits as in 64. Other blocks (NaN, inf, |x| ≥ 2^31) take the rules.
#[inline(always)]
fn through_i32<S: Typed, D: Typed>(
    s: &[S::Prim],
    d: &mut [D::Prim],
    one: impl Fn(S::Prim) -> D::Prim,
) {
    let n = s.len().min(d.len());
    let (s, d) = (&s[..n], &mut d[..n]);
    let (blocks, _) = s.as_chunks::<BLOCK>();
    for (b, block) in blocks.iter().enumerate() {
        let block = block.map(widened::<S>);
        // (A fold, not `all`, so that the test vectorises; NaN fails it.)
        let inside = block
            .iter()
            .fold(true, |ok, x| ok & (x.abs() < 2_147_483_648.0));
        let out = &mut d[b * BLOCK..][..BLOCK];
        if !inside {
            for (o, &x) in out.iter_mut().zip(&s[b * BLOCK..][..BLOCK]) {
                *o = one(x);
            }
            continue;
        }
        // SAFETY: |x| < 2^31, so `x` is finite and its truncation fits in an i32.
        let t: [i32; BLOCK] = block.map(|x| unsafe { x.to_int_unchecked::<i32>() });
        match D::SIZE {
            1 => out.copy_from_slice(bytemuck::cast_slice(&t.map(|t| t as u8))),
            2 => out.copy_from_slice(bytemuck::cast_slice(&t.map(|t| t as u16))),
            4 => out.copy_from_slice(bytemuck::cast_slice(&t)),
            _ => out.copy_from_slice(bytemuck::cast_slice(&t.map(i64::from))),
        }
    }
    let done = blocks.len() * BLOCK;
    for (o, &x) in d[done..].iter_mut().zip(&s[done..]) {
        *o = one(x);
    }
}

/// [`typed_loop`] as a task that [`with_isa`] compiles for an instruction set's features.
struct Loop<'a, S, D, const SATURATE: bool> {
    src: &'a [u8],
    dst: &'a mut [u8],
    types: PhantomData<(S, D)>,
}

impl<S: Typed, D: Typed, const SATURATE: bool> Task for Loop<'_, S, D, SATURATE> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        typed_loop::<S, D, SATURATE>(self.src, self.dst);
    }
}

/// [`kernel`] compiled for `Isa::ALL[ISA]`'s features.
fn kernel_on<S: Typed, D: Typed, const ISA: usize, const SATURATE: bool>(
    src: &[u8],
    dst: &mut [u8],
) {
    let task = Loop::<S, D, SATURATE> {
        src,
        dst,
        types: PhantomData,
    };
    with_isa(Isa::ALL[ISA], task);
}

/// The Torch-rounding loop of a pair that [`truncates_to_low_bits`] compiled for `isa` (AVX2,
/// AVX-512), where the pair is one: wider vectors for its 32-bit truncations (compiled for SSE2,
/// such a loop ran at half the speed of float32 → int32's AVX-512 kernel).
pub(crate) fn torch_on(from: DType, to: DType, isa: Isa) -> Option<Kernel> {
    /// The loop of `$src` → `$to` on `isa`.
    macro_rules! on {
        ($src:ty, $dst:ty) => {
            match isa {
                Isa::Avx2 => Some(kernel_on::<$src, $dst, 2, false> as Kernel),
                Isa::Avx512 => Some(kernel_on::<$src, $dst, 3, false> as Kernel),
                Isa::Scalar | Isa::Portable => None,
            }
        };
    }
    /// `on!` by destination.
    macro_rules! to {
        ($src:ty) => {
            match to {
                DType::Int8 => on!($src, i8),
                DType::Int16 => on!($src, i16),
                DType::UInt16 => on!($src, u16),
                DType::Int64 => on!($src, i64),
                DType::UInt32 => on!($src, u32),
                DType::UInt64 => on!($src, u64),
                _ => None,
            }
        };
    }
    if !truncates_to_low_bits(from, to) || !isa.is_available() {
        return None;
    }
    match from {
        DType::Float32 => to!(f32),
        DType::BFloat16 => to!(BF16),
        _ => None,
    }
}

/// The typed loops of `$src` → `$to` in Torch and Saturate rounding, else `None`.
macro_rules! by_destination {
    ($to:expr, $src:ty) => {
        match $to {
            DType::Bool => pair::<$src, Bool>(),
            DType::UInt8 => pair::<$src, u8>(),
            DType::Int8 => pair::<$src, i8>(),
            DType::Int16 => pair::<$src, i16>(),
            DType::Int32 => pair::<$src, i32>(),
            DType::Int64 => pair::<$src, i64>(),
            DType::UInt16 => pair::<$src, u16>(),
            DType::UInt32 => pair::<$src, u32>(),
            DType::UInt64 => pair::<$src, u64>(),
            DType::Float32 => pair::<$src, f32>(),
            DType::Float64 => pair::<$src, f64>(),
            DType::Complex64 => pair::<$src, C64>(),
            DType::Complex128 => pair::<$src, C128>(),
            _ => None,
        }
    };
}

/// The loops of `S` → `D`, compiled only for the pairs that run them (`const`).
fn pair<S: Typed, D: Typed>() -> Option<(Kernel, Kernel)> {
    if const { !typed(S::DTYPE, D::DTYPE) } {
        None
    } else if const { matches!(S::DTYPE.category(), Category::Floating | Category::Complex) } {
        Some((kernel::<S, D, false>, kernel::<S, D, true>))
    } else {
        // From an integer or bool, Saturate converts as Torch does (`Lane::saturate` defers to
        // `torch` for such values): one loop serves both.
        Some((kernel::<S, D, false>, kernel::<S, D, false>))
    }
}

/// Whether `from` → `to` runs a typed loop, where both are typed lanes (and the pair has no SIMD
/// kernel, which `plan.rs` prefers): faster than the rules on nearly every pair (`dtcast bench
/// --backend scalar,portable`), but not complex64 into a narrower integer or bool (LLVM gathers
/// the real parts for a loop the rules run faster unvectorised), uint64 → complex128, uint64 →
/// uint16 and int8 → complex64, which keep the rules. bfloat16 is looked up (`tables.rs`) or goes
/// up through float32 (`through.rs`) but where the rule is a shift and a truncation: into int8,
/// int16 and uint16 the loop beats the table, and into int64, uint32 and uint64 it runs block by
/// block ([`through_i32`]). float16's conversion to float32 does not vectorise for the baseline
/// target, so float16 keeps its table.
pub(crate) const fn typed(from: DType, to: DType) -> bool {
    use DType::*;
    match (from, to) {
        (Complex64, Bool | UInt8 | Int8 | Int16 | Int32 | UInt16 | UInt32) => false,
        (UInt64, Complex128 | UInt16) | (Int8, Complex64) => false,
        (BFloat16, Int8 | Int16 | UInt16 | Int64 | UInt32 | UInt64) => true,
        (BFloat16 | Float16, _) => false,
        _ => true,
    }
}

/// The typed loops of `from` → `to` in Torch and Saturate rounding, where the pair has them.
pub(crate) fn kernels(from: DType, to: DType) -> Option<(Kernel, Kernel)> {
    match from {
        DType::Bool => by_destination!(to, Bool),
        DType::UInt8 => by_destination!(to, u8),
        DType::Int8 => by_destination!(to, i8),
        DType::Int16 => by_destination!(to, i16),
        DType::Int32 => by_destination!(to, i32),
        DType::Int64 => by_destination!(to, i64),
        DType::UInt16 => by_destination!(to, u16),
        DType::UInt32 => by_destination!(to, u32),
        DType::UInt64 => by_destination!(to, u64),
        DType::Float32 => by_destination!(to, f32),
        DType::Float64 => by_destination!(to, f64),
        DType::Complex64 => by_destination!(to, C64),
        DType::Complex128 => by_destination!(to, C128),
        DType::BFloat16 => by_destination!(to, BF16),
        _ => None,
    }
}
