//! The generic kernels, instantiated for every (source, destination) pair by a generated match.
//!
//! For each pair, [`PairFns`]: both roundings' kernels, the per-element check, the verdict table
//! of a 1- or 2-byte source, and `faster` — the kernel used by every `Isa` but Scalar where the
//! pair has no SIMD kernel: for pairs from float16/bfloat16 and the one-byte dtypes the table
//! kernels of `tables.rs` (every source pattern's output, built once from the rules); for pairs
//! among bool, the integers, float32, float64, complex64 and complex128 (and bfloat16 into int8,
//! int16, uint16 and float64) the typed loops of `plain.rs` (the rules' own per-element
//! conversion, [`element`], over the buffers viewed as numbers, which LLVM vectorises); and the
//! chains of `through.rs` for the pairs torch converts through float32.
//!
//! **Compile-time budget.** 1,156 pairs multiply every generic line, so per-pair code stays the
//! rules themselves: whatever does not depend on the pair's types (building and reading a table,
//! collecting a verdict table) is written once and handed the pair's scalar kernel; code for a
//! subset of pairs is instantiated only for it (`if const { .. }`); the per-element checks and
//! verdict tables are compiled per source type, the destination a value ([`Destination`]).

use dtcast_dtype::{packing, DType};

use crate::check;
use crate::error::{CastError, ValueErrorKind};
use crate::lanes::{
    Bool, E4M3Fn, E4M3Fnuz, E5M2Fnuz, Lane, Quirks, BC32, BF16, C128, C32, C64, E5M2, E8M0, F16,
};
use crate::lowp_lanes::{ml_float, I1, I2, I4, U1, U2, U4};
use crate::mode::{Rounding, Verify};
use crate::rules::Val;

/// Converts whole elements of `src` into `dst` (same element count, checked by the caller).
pub(crate) type Kernel = fn(src: &[u8], dst: &mut [u8]);

/// Finds the first element that the destination cannot take; `base` is the index of `src[0]`
/// in the whole buffer.
pub(crate) type Checker = fn(src: &[u8], verify: Verify, base: usize) -> Result<(), CastError>;

/// For a source of at most 16 bits: whether each possible source element passes the
/// verification, indexed by the element's bits.
pub(crate) type AcceptTable = fn(verify: Verify) -> Option<Vec<bool>>;

/// The compiled functions for one pair.
#[derive(Clone, Copy)]
pub(crate) struct PairFns {
    pub(crate) torch: Kernel,
    pub(crate) saturate: Kernel,
    pub(crate) check: Checker,
    pub(crate) accept_table: AcceptTable,
    /// Kernels in Torch and Saturate rounding that give the rules' bytes faster than they do, for
    /// pairs without SIMD kernels: typed loops (`plain.rs`) where the pair has them, else tables
    /// (`tables.rs`) from a float16, bfloat16 or one-byte source.
    pub(crate) faster: Option<(Kernel, Kernel)>,
}

impl PairFns {
    /// The scalar kernel of a rounding.
    pub(crate) fn scalar(&self, rounding: Rounding) -> Kernel {
        match rounding {
            Rounding::Torch => self.torch,
            Rounding::Saturate => self.saturate,
        }
    }

    /// The faster non-SIMD kernel of a rounding, where the pair has one.
    pub(crate) fn faster(&self, rounding: Rounding) -> Option<Kernel> {
        self.faster.map(|(torch, saturate)| match rounding {
            Rounding::Torch => torch,
            Rounding::Saturate => saturate,
        })
    }
}

#[inline(always)]
pub(crate) fn convert<S: Lane, D: Lane, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    let q = Quirks::of(S::DTYPE, D::DTYPE);
    if !SATURATE && q.part_bits {
        // The real part's bytes as they are; a complex destination's imaginary part is +0.
        let part = S::SIZE.min(D::SIZE);
        for (s, d) in src.chunks_exact(S::SIZE).zip(dst.chunks_exact_mut(D::SIZE)) {
            d[..part].copy_from_slice(&s[..part]);
            d[part..].fill(0);
        }
        return;
    }
    for (s, d) in src.chunks_exact(S::SIZE).zip(dst.chunks_exact_mut(D::SIZE)) {
        element::<S, D, SATURATE>(S::read(s), q).write(d);
    }
}

/// One element converted by the rules (`q`: the pair's quirks), outside [`Quirks::part_bits`]'
/// byte copies: the body of [`convert`], and of the typed loops (`plain.rs`) that give its bytes.
#[inline(always)]
pub(crate) fn element<S: Lane, D: Lane, const SATURATE: bool>(s: S, q: Quirks) -> D {
    let v = value(s, q);
    if SATURATE {
        D::saturate(v)
    } else {
        D::torch(v, q)
    }
}

/// [`convert`] over buffers as they are stored: a packed side (float6, float4, the sub-byte
/// integers) is unpacked to one byte per element and packed again, 64 elements at a time on the
/// stack. For the few elements around a SIMD loop (its prologue and tail); `packed.rs` does whole
/// buffers.
pub(crate) fn convert_stored<S: Lane, D: Lane, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    const CHUNK: usize = 64;
    let (sb, db) = (S::BITS, D::BITS);
    if !S::DTYPE.is_packed() && !D::DTYPE.is_packed() {
        return convert::<S, D, SATURATE>(src, dst);
    }
    let n = (src.len() * 8 / sb).min(dst.len() * 8 / db);
    let (mut codes, mut out) = ([0u8; CHUNK], [0u8; CHUNK]);
    let mut i = 0;
    while i < n {
        // Whole buffers end on a byte, and `i` is a multiple of 64: every piece is whole bytes.
        let k = CHUNK.min(n - i);
        let s = &src[i * sb / 8..(i + k) * sb / 8];
        let d = &mut dst[i * db / 8..(i + k) * db / 8];
        let s = if S::DTYPE.is_packed() {
            let unpacked = packing::unpack(S::DTYPE, s, &mut codes[..k]);
            debug_assert!(unpacked.is_ok());
            &codes[..k]
        } else {
            s
        };
        if D::DTYPE.is_packed() {
            convert::<S, D, SATURATE>(s, &mut out[..k]);
            let packed = packing::pack(D::DTYPE, &out[..k], d);
            debug_assert!(packed.is_ok());
        } else {
            convert::<S, D, SATURATE>(s, d);
        }
        i += k;
    }
}

/// The value a conversion reads from `s`: ml_dtypes' reading where torch cannot cast the pair.
#[inline(always)]
fn value<S: Lane>(s: S, q: Quirks) -> Val {
    if q.ml {
        s.val_ml()
    } else {
        s.val()
    }
}

/// What a destination's Exact check needs of it: the value its Torch rounding writes for `v`.
/// Generic over the destination alone, so the checks below are compiled once per source.
type RoundTrip = fn(v: Val, q: Quirks) -> Val;

fn round_trip<D: Lane>(v: Val, q: Quirks) -> Val {
    D::torch(v, q).val()
}

/// What the checks know of a pair's destination.
#[derive(Clone, Copy)]
struct Destination {
    dtype: DType,
    round_trip: RoundTrip,
}

impl Destination {
    fn of<D: Lane>() -> Self {
        Destination {
            dtype: D::DTYPE,
            round_trip: round_trip::<D>,
        }
    }
}

/// Whether the destination takes `v` in Checked (or Exact) mode; the problem if not. Allocates
/// nothing.
#[inline(always)]
fn problem(
    v: Val,
    verify: Verify,
    q: Quirks,
    to: Destination,
    limits: &check::Limits,
) -> Option<Problem> {
    match verify {
        Verify::Exact => {
            let result = (to.round_trip)(v, q);
            (!check::same_value(v, result)).then_some(Problem::Changes(result))
        }
        Verify::Checked => check::checked_problem(v, limits).map(Problem::Kind),
    }
}

/// A problem found while checking, turned into an error (and text) only when reported.
enum Problem {
    Kind(ValueErrorKind),
    Changes(Val),
}

// The per-element checks and verdict tables are compiled per source type, with the destination
// as a value: compiled per pair, they were a large share of the crate's LLVM input (`cargo
// llvm-lines`) for code that only Checked/Exact casts run. The price is one indirect call per
// element in Exact mode, which measured within noise.

fn check_pair<S: Lane, D: Lane>(src: &[u8], verify: Verify, base: usize) -> Result<(), CastError> {
    check_source::<S>(src, verify, base, Destination::of::<D>())
}

fn check_source<S: Lane>(
    src: &[u8],
    verify: Verify,
    base: usize,
    to: Destination,
) -> Result<(), CastError> {
    let q = Quirks::of(S::DTYPE, to.dtype);
    let limits = check::Limits::of(to.dtype);
    for (i, s) in src.chunks_exact(S::SIZE).enumerate() {
        let v = value(S::read(s), q);
        if let Some(p) = problem(v, verify, q, to, &limits) {
            let kind = match p {
                Problem::Kind(kind) => kind,
                Problem::Changes(result) => ValueErrorKind::Inexact {
                    result: check::display(result),
                },
            };
            return Err(CastError::Value {
                index: base + i,
                value: check::display(v),
                from: S::DTYPE,
                to: to.dtype,
                kind,
            });
        }
    }
    Ok(())
}

fn accept_table<S: Lane, D: Lane>(verify: Verify) -> Option<Vec<bool>> {
    accept_table_of::<S>(verify, Destination::of::<D>())
}

fn accept_table_of<S: Lane>(verify: Verify, to: Destination) -> Option<Vec<bool>> {
    if const { S::SIZE > 2 } {
        return None;
    }
    let (q, limits) = (Quirks::of(S::DTYPE, to.dtype), check::Limits::of(to.dtype));
    Some(table_of(1 << (8 * S::SIZE), &|code| {
        let bytes = (code as u16).to_le_bytes();
        problem(value(S::read(&bytes[..S::SIZE]), q), verify, q, to, &limits).is_none()
    }))
}

/// `accepts` of every code below `codes`, in order: written once for every pair (only the
/// verdict is generic).
fn table_of(codes: usize, accepts: &dyn Fn(usize) -> bool) -> Vec<bool> {
    (0..codes).map(accepts).collect()
}

fn pair<S: Lane, D: Lane>() -> PairFns {
    PairFns {
        torch: convert::<S, D, false>,
        saturate: convert::<S, D, true>,
        check: check_pair::<S, D>,
        accept_table: accept_table::<S, D>,
        // `or`, not `or_else`: a closure per pair would be a function per pair.
        faster: crate::plain::kernels(S::DTYPE, D::DTYPE).or(crate::tables::kernels::<S, D>()),
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
            Float8E4M3Fnuz => E4M3Fnuz, Float8E5M2Fnuz => E5M2Fnuz, Float8E8M0Fnu => E8M0,
            Float8E4M3 => ml_float!(Float8E4M3), Float8E3M4 => ml_float!(Float8E3M4),
            Float8E4M3B11Fnuz => ml_float!(Float8E4M3B11Fnuz),
            Float8E5M3Fnu => ml_float!(Float8E5M3Fnu),
            Float6E2M3Fn => ml_float!(Float6E2M3Fn), Float6E3M2Fn => ml_float!(Float6E3M2Fn),
            Float4E2M1Fn => ml_float!(Float4E2M1Fn),
            Int4 => I4, UInt4 => U4, Int2 => I2, UInt2 => U2, Int1 => I1, UInt1 => U1)
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

/// The kernels of a pair; `None` for `float4_e2m1fn_x2` (a byte holding two values, whose casts
/// go through a view as float4_e2m1fn).
pub(crate) fn pair_fns(from: DType, to: DType) -> Option<PairFns> {
    with_lanes!(by_source!(from, to))
}

#[cfg(feature = "self-test")]
pub(crate) mod tests {
    use super::*;

    fn every_pair_has_kernels() {
        let values = DType::ALL
            .into_iter()
            .filter(|d| *d != DType::Float4E2M1FnX2);
        for from in values.clone() {
            for to in values.clone() {
                assert!(pair_fns(from, to).is_some(), "{from} -> {to}");
            }
        }
    }

    crate::self_test::list!(every_pair_has_kernels);
}
