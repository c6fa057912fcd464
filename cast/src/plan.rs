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
    /// Whether `kernel` is two kernels through float32, a table or a typed loop (`through.rs`,
    /// `tables.rs`, `plain.rs`).
    pub(crate) faster: bool,
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
    // (`through.rs`, Torch rounding); a float16/bfloat16 source is looked up (`tables.rs`); a
    // one-byte integer or bool one converted by typed loops (`plain.rs`).
    let through = match rounding {
        Rounding::Torch if isa != Isa::Scalar => through::kernels(from, to, isa),
        Rounding::Torch | Rounding::Saturate => None,
    };
    let faster = fns.faster(rounding).filter(|_| isa != Isa::Scalar);
    let scalar = faster.unwrap_or(fns.scalar(rounding));
    let simd = fast.is_some();
    let faster = !simd && (through.is_some() || faster.is_some());
    let (kernel, streaming) = match (fast, through) {
        (Some(f), _) => (f.kernel, f.streaming),
        (None, Some(two)) => two,
        (None, None) => (scalar, scalar),
    };
    let screened = fast.and_then(|f| f.screened);
    Plan {
        kernel,
        streaming,
        simd,
        faster,
        screened,
        check,
    }
}
