//! Typed loops for the pairs without SIMD kernels from a one-byte integer or bool source (int8,
//! uint8, bool) into an integer, bool, float32 or float64 destination: torch converts these as
//! Rust's `as` does (integers wrap or extend; into bool, nonzero is true; into a float, one
//! rounding to nearest-even), so a loop of `as` over the buffers viewed as slices of numbers is
//! the rules' answer, and LLVM vectorises it for the baseline target. Without them these pairs
//! went block by block through a per-byte table (`packed.rs`) at 1.8–2.4 Gelem/s on one thread
//! in cache; typed, int8 → int16 runs at 28, uint8 → bool at 55, int8 → float32 at 8.6 (AVX-512
//! machine, `dtcast bench --backend scalar,avx512 --threads 1 --elements 262144`). Wider integer
//! sources are left to the rules, which LLVM vectorises as well as this loop (int16 → int32 at
//! 14 Gelem/s either way; uint32 → uint8 ran at 14 there and 9.7 here).
//!
//! Where a buffer is not aligned for its element type, or the machine is big-endian, the rules
//! run instead. Every instruction set but [`Isa::Scalar`](crate::isa::Isa) uses these loops
//! (`plan.rs`), as the tables of `tables.rs`.

use dtcast_dtype::DType;

use crate::dispatch::{convert, Kernel};
use crate::lanes::{Bool, Lane};

/// A destination that takes an integer as torch does.
trait Number: Lane {
    /// The storage as a Rust number (bool: its byte).
    type Prim: bytemuck::Pod;
    /// The element of value `w`.
    fn from_i64(w: i64) -> Self::Prim;
}

/// A one-byte source whose value is an integer (bool: 0 or 1).
trait Whole: Number {
    /// `x` converted into `D`.
    fn to<D: Number>(x: Self::Prim) -> D::Prim;
}

macro_rules! number {
    ($($ty:ty),*) => {$(
        impl Number for $ty {
            type Prim = $ty;
            #[inline(always)]
            fn from_i64(w: i64) -> $ty {
                w as $ty
            }
        }
    )*};
}
number!(u8, i8, i16, i32, i64, u16, u32, u64, f32, f64);

macro_rules! whole {
    ($($ty:ty),*) => {$(
        impl Whole for $ty {
            /// As `lanes.rs` reads it: a `Val::Int`.
            #[inline(always)]
            fn to<D: Number>(x: $ty) -> D::Prim {
                D::from_i64(i64::from(x))
            }
        }
    )*};
}
whole!(u8, i8);

impl Number for Bool {
    type Prim = u8;
    #[inline(always)]
    fn from_i64(w: i64) -> u8 {
        u8::from(w != 0)
    }
}

impl Whole for Bool {
    /// Any nonzero byte is true, as `Bool::val` reads it.
    #[inline(always)]
    fn to<D: Number>(x: u8) -> D::Prim {
        D::from_i64(i64::from(x != 0))
    }
}

/// Converts `src` into `dst` (whole elements, as many as `dst` holds) by a typed loop where both
/// buffers are aligned for their types on a little-endian machine; else by the rules.
fn kernel<S: Whole, D: Number>(src: &[u8], dst: &mut [u8]) {
    let typed = (
        bytemuck::try_cast_slice::<u8, S::Prim>(src),
        bytemuck::try_cast_slice_mut::<u8, D::Prim>(dst),
    );
    match typed {
        (Ok(s), Ok(d)) if cfg!(target_endian = "little") => {
            for (d, &s) in d.iter_mut().zip(s) {
                *d = S::to::<D>(s);
            }
        }
        // Torch and Saturate convert integers alike (`Lane::saturate` defers to `torch` for them).
        _ => convert::<S, D, false>(src, dst),
    }
}

/// The typed loop from `$from`, a one-byte integer or bool dtype, to `$to`, else `None`.
macro_rules! by_source {
    ($from:expr, $to:expr) => {
        match $from {
            DType::Bool => by_destination!($to, Bool),
            DType::UInt8 => by_destination!($to, u8),
            DType::Int8 => by_destination!($to, i8),
            _ => None,
        }
    };
}

macro_rules! by_destination {
    ($to:expr, $src:ty) => {
        match $to {
            DType::Bool => Some(kernel::<$src, Bool> as Kernel),
            DType::UInt8 => Some(kernel::<$src, u8> as Kernel),
            DType::Int8 => Some(kernel::<$src, i8> as Kernel),
            DType::Int16 => Some(kernel::<$src, i16> as Kernel),
            DType::Int32 => Some(kernel::<$src, i32> as Kernel),
            DType::Int64 => Some(kernel::<$src, i64> as Kernel),
            DType::UInt16 => Some(kernel::<$src, u16> as Kernel),
            DType::UInt32 => Some(kernel::<$src, u32> as Kernel),
            DType::UInt64 => Some(kernel::<$src, u64> as Kernel),
            DType::Float32 => Some(kernel::<$src, f32> as Kernel),
            DType::Float64 => Some(kernel::<$src, f64> as Kernel),
            _ => None,
        }
    };
}

/// The typed loop of `from` → `to` (the same in Torch and Saturate rounding), where the pair has
/// one.
pub(crate) fn kernels(from: DType, to: DType) -> Option<(Kernel, Kernel)> {
    by_source!(from, to).map(|k| (k, k))
}
