//! One plan per (pair, mode, instruction set): which kernel converts, and whether and how the
//! values are verified first. Decided here and nowhere else.

use dtcast_dtype::DType;

use crate::check::lossless;
use crate::dispatch::{Kernel, PairFns};
use crate::isa::Isa;
use crate::kernels::{select, ScreenedKernel};
use crate::mode::{CastMode, Rounding, Verify};
use crate::screen::{self, Check};
use crate::through;

/// How one cast runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// The conversion: `isa`'s SIMD kernel where the pair has one, which reads and writes the
    /// buffers as stored (packed sides packed), else the scalar rules, which take packed sides
    /// one byte per element (`packed.rs` unpacks and packs around them).
    pub(crate) kernel: Kernel,
    /// The same, with streaming stores into any destination: for a large destination written a
    /// block at a time.
    pub(crate) streaming: Kernel,
    /// Whether `kernel` is a SIMD kernel (else the scalar rules, a table or a typed loop).
    pub(crate) simd: bool,
    /// Whether a one-byte source is looked up in a table of what each of its 256 values becomes
    /// (`packed.rs`, by `isa`'s vectors where `kernels::looks_up_bytes`), block by block, instead
    /// of converted by `kernel` (which builds the table); `check`'s screen, if any, then runs
    /// on each block (read first or not, as the cast's entry point asks).
    pub(crate) bytes: bool,
    /// `streaming` that also screens a 4- or 8-byte source, where the pair has one.
    pub(crate) screened: Option<ScreenedKernel>,
    /// What is verified, and how; `None` where the mode verifies nothing or no value of the
    /// source can fail (every value of `from` is exactly a value of `to`).
    pub(crate) check: Option<(Verify, Check)>,
}

/// The plan for `n` elements `from` → `to` in `mode` on `isa`.
pub(crate) fn plan(
    from: DType,
    to: DType,
    mode: CastMode,
    n: usize,
    isa: Isa,
    fns: &PairFns,
) -> Plan {
    let rounding = mode.rounding();
    let check = mode.verify().filter(|_| !lossless(from, to)).map(|verify| {
        (
            verify,
            screen::check(from, to, verify, n, isa, fns.accept_table),
        )
    });
    // A packed source that must be verified goes block by block (its codes are checked
    // unpacked), where the kernel must take one byte per element: the scalar rules.
    let fast = select(isa, from, to, rounding).filter(|_| !(from.is_packed() && check.is_some()));
    // Without a SIMD kernel, on every set but the scalar one (which is the rules themselves): a
    // pair into float16/bfloat16/float8 that torch rounds through float32 takes two kernels
    // (`through.rs`, Torch rounding), and so does a float16/bfloat16 source into bool, the
    // integers, float64 and complex types, up through float32 (both roundings); the other
    // float16/bfloat16 pairs are looked up (`tables.rs`); a one-byte integer or bool source is
    // converted by typed loops (`plain.rs`). A one-byte source may be looked up byte by byte
    // instead (`by_bytes`), by a table these kernels build.
    let through = match rounding {
        Rounding::Torch if isa != Isa::Scalar => through::kernels(from, to, isa),
        Rounding::Torch | Rounding::Saturate => None,
    }
    .or_else(|| through::up_kernels(from, to, rounding, isa));
    let faster = match rounding {
        Rounding::Torch => crate::plain::torch_on(from, to, isa),
        Rounding::Saturate => None,
    }
    .or(fns.faster(rounding))
    .filter(|_| isa != Isa::Scalar);
    let scalar = faster.unwrap_or(fns.scalar(rounding));
    let simd = fast.is_some();
    let (kernel, streaming) = match (fast, through) {
        (Some(f), _) => (f.kernel, f.streaming),
        (None, Some(two)) => two,
        (None, None) => (scalar, scalar),
    };
    let screened = fast.and_then(|f| f.screened);
    let typed = crate::plain::kernels(from, to).is_some();
    let bytes = by_bytes(from, to, isa, [simd, typed, through.is_some()]);
    Plan {
        kernel,
        streaming,
        simd,
        bytes,
        screened,
        check,
    }
}

/// Whether a cast of a one-byte source is looked up byte by byte, block by block: where nothing
/// faster converts it (`simd`: the pair has a SIMD kernel on `isa`; `typed`: a typed loop;
/// `through`: two SIMD kernels through float32), and where `isa` looks bytes up by vectors
/// (AVX-512 VBMI; AVX2 for one-byte entries) from an integer or bool into float8, float16 or
/// bfloat16, whose kernels convert through float32. A table that is not read by vectors (one entry
/// at a time, as `tables.rs`'s kernel for the casts that verify) still beats the scalar rules, and
/// on the portable set the trip through float32 too, but not AVX2's trip into float16/bfloat16.
///
/// Looked up by vectors, integer and bool sources into the float8 formats and float16/bfloat16
/// reach memory speed where their kernels (through float32) do not. Not where a float8 source has
/// a kernel of its own, nor into float32 from integers (the kernels are faster there), nor between
/// integers (the typed loops and the tables run alike).
fn by_bytes(from: DType, to: DType, isa: Isa, [simd, typed, through]: [bool; 3]) -> bool {
    let vectors = !to.is_packed() && crate::kernels::looks_up_bytes(isa, crate::lanes::unit(to));
    let integer = from.category().is_integer() || from == DType::Bool;
    let nothing_faster = !simd && !typed && (!through || vectors || isa == Isa::Portable);
    let not_through_float32 =
        vectors && integer && to.is_floating_point() && crate::lanes::unit(to) <= 2;
    from.bits() == 8 && isa != Isa::Scalar && (nothing_faster || not_through_float32)
}
