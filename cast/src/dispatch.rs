//! The generic kernels, instantiated for every (source, destination) pair by a generated match.

use dtcast_dtype::DType;

use crate::check;
use crate::error::CastError;
use crate::lanes::{
    Bool, E4M3Fn, E4M3Fnuz, E5M2Fnuz, Lane, Quirks, BC32, BF16, C128, C32, C64, E5M2, E8M0, F16,
};

/// Converts whole elements of `src` into `dst` (same element count, checked by the caller).
pub(crate) type Kernel = fn(src: &[u8], dst: &mut [u8]);

/// Finds the first element that the destination cannot take; `base` is the index of `src[0]`
/// in the whole buffer, `exact` picks Exact over Checked.
pub(crate) type Checker = fn(src: &[u8], exact: bool, base: usize) -> Result<(), CastError>;

/// The compiled functions for one pair.
#[derive(Clone, Copy)]
pub(crate) struct PairFns {
    pub(crate) torch: Kernel,
    pub(crate) saturate: Kernel,
    pub(crate) check: Checker,
}

#[inline(always)]
pub(crate) fn convert<S: Lane, D: Lane, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    let q = Quirks::of(S::DTYPE, D::DTYPE);
    for (s, d) in src.chunks_exact(S::SIZE).zip(dst.chunks_exact_mut(D::SIZE)) {
        let v = S::read(s).val();
        let out = if SATURATE {
            D::saturate(v)
        } else {
            D::torch(v, q)
        };
        out.write(d);
    }
}

fn check_pair<S: Lane, D: Lane>(src: &[u8], exact: bool, base: usize) -> Result<(), CastError> {
    let q = Quirks::of(S::DTYPE, D::DTYPE);
    for (i, s) in src.chunks_exact(S::SIZE).enumerate() {
        let v = S::read(s).val();
        let problem = if exact {
            check::exact_problem(v, D::torch(v, q).val())
        } else {
            check::checked_problem(v, D::DTYPE)
        };
        if let Some(kind) = problem {
            return Err(CastError::Value {
                index: base + i,
                value: check::display(v),
                from: S::DTYPE,
                to: D::DTYPE,
                kind,
            });
        }
    }
    Ok(())
}

fn pair<S: Lane, D: Lane>() -> PairFns {
    PairFns {
        torch: convert::<S, D, false>,
        saturate: convert::<S, D, true>,
        check: check_pair::<S, D>,
    }
}

/// Calls `$m!($($args)*; <every dtype> => <its lane>, ...)`.
macro_rules! with_lanes {
    ($m:ident!($($args:tt)*)) => {
        $m!($($args)*;
            Bool => Bool, UInt8 => u8, Int8 => i8, Int16 => i16, Int32 => i32, Int64 => i64,
            UInt16 => u16, UInt32 => u32, UInt64 => u64, Float16 => F16, BFloat16 => BF16,
            Float32 => f32, Float64 => f64, Complex32 => C32, Complex64 => C64, Complex128 => C128,
            BComplex32 => BC32, Float8E4M3Fn => E4M3Fn, Float8E5M2 => E5M2,
            Float8E4M3Fnuz => E4M3Fnuz, Float8E5M2Fnuz => E5M2Fnuz, Float8E8M0Fnu => E8M0)
    };
}

macro_rules! by_source {
    ($from:expr, $to:expr; $($dt:ident => $lane:ty),*) => {
        match $from {
            $(DType::$dt => with_lanes!(by_destination!($to, $lane)),)*
            _ => None,
        }
    };
}

macro_rules! by_destination {
    ($to:expr, $src:ty; $($dt:ident => $lane:ty),*) => {
        match $to {
            $(DType::$dt => Some(pair::<$src, $lane>()),)*
            _ => None,
        }
    };
}

/// The kernels of a pair; `None` only for a dtype this crate version does not know.
pub(crate) fn pair_fns(from: DType, to: DType) -> Option<PairFns> {
    with_lanes!(by_source!(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_has_kernels() {
        for from in DType::ALL {
            for to in DType::ALL {
                assert!(pair_fns(from, to).is_some(), "{from} -> {to}");
            }
        }
    }
}
