//! Table kernels for the pairs without SIMD kernels or typed loops from float16, bfloat16 and the
//! one-byte dtypes: the destination element of every source bit pattern, computed once by the
//! scalar rules ([`dispatch::convert`](crate::dispatch)) and then looked up — so they give the
//! rules' bytes by construction. The per-element rules read each value into a general form
//! (`rules::Val`) and round it in f64 arithmetic, several nanoseconds an element; a lookup costs a
//! load and a store, several times faster.
//!
//! Every instruction set but [`Isa::Scalar`](crate::isa::Isa) uses them (`plan.rs`): the scalar
//! set is the rules themselves, which `cast_reference` and the tests compare with. (A one-byte
//! source that nothing verifies is looked up by `packed.rs`'s byte tables instead, by vectors
//! where the set has them; these serve its Checked and Exact casts.)

use std::sync::OnceLock;

use dtcast_dtype::DType;

use crate::dispatch::{convert, Kernel};
use crate::lanes::Lane;

/// Whether `S` → `D` is looked up: from float16 or bfloat16, whose rules do float arithmetic in
/// software, into a whole-byte dtype of at most 8 bytes (a complex128 entry would make a table of
/// 1 MiB), and from a one-byte dtype into any whole-byte one (`plain.rs`'s typed loops take
/// precedence, where a pair has them): on those the table beats the rules, which round in f64.
/// Integer sources of two bytes and more convert faster by their rules. Not looked up: bfloat16
/// → bool (a compare), which the rules do faster, and bfloat16 into the integers that its typed
/// loops take (`plain::typed`: a shift and a truncation); nor the pairs that go up through
/// float32 (`through::goes_up`: float16 into bool, the integers, float64 and the complex types,
/// bfloat16 into uint8, int32, float64 and complex64), faster than their tables. What is left:
/// float16/bfloat16 into the float8 formats without a kernel of their own, complex32 and
/// bcomplex32 (and each other where no kernel serves).
pub(crate) const fn looked_up<S: Lane, D: Lane>() -> bool {
    let half = matches!(S::DTYPE, DType::Float16 | DType::BFloat16);
    // (bfloat16's typed loops: `plain::typed`.)
    let cheap = matches!(S::DTYPE, DType::BFloat16)
        && (matches!(D::DTYPE, DType::Bool) || crate::plain::typed(S::DTYPE, D::DTYPE));
    let byte = S::SIZE == 1 && !S::DTYPE.is_packed();
    let up = crate::through::goes_up(S::DTYPE, D::DTYPE);
    ((half && !cheap && !up && D::SIZE <= 8) || byte) && !D::DTYPE.is_packed()
}

/// The table kernels of `S` → `D` in Torch and Saturate rounding, where the pair is looked up.
/// Instantiated only for those pairs (`const`), and generic only in the scalar kernel they are
/// built from: one table kernel is compiled for all of them.
pub(crate) fn kernels<S: Lane, D: Lane>() -> Option<(Kernel, Kernel)> {
    if const { looked_up::<S, D>() } {
        Some((kernel::<S, D, false>, kernel::<S, D, true>))
    } else {
        None
    }
}

/// One table per (source, destination, rounding), built on first use.
static TABLES: [OnceLock<Box<[u8]>>; 2 * DType::COUNT * DType::COUNT] =
    [const { OnceLock::new() }; 2 * DType::COUNT * DType::COUNT];

/// A cast this short, before its table exists, runs on the rules: building a table converts
/// 65,536 elements (256 from a one-byte source).
const BUILD_FROM: usize = 4096;

/// Converts `src` into `dst` (whole elements of a one- or two-byte source, as many as `dst`
/// holds) by table.
fn kernel<S: Lane, D: Lane, const SATURATE: bool>(src: &[u8], dst: &mut [u8]) {
    let slot =
        (usize::from(SATURATE) * DType::COUNT + S::DTYPE.index()) * DType::COUNT + D::DTYPE.index();
    let pair = Pair {
        source: S::SIZE,
        size: D::SIZE,
        rules: convert::<S, D, SATURATE>,
    };
    look_up(&TABLES[slot], pair, src, dst);
}

/// What [`look_up`] knows of a pair: its elements' sizes (the source's 1 or 2 bytes) and its
/// scalar kernel.
#[derive(Clone, Copy)]
struct Pair {
    source: usize,
    size: usize,
    rules: Kernel,
}

/// [`kernel`] for a pair's table `slot`.
fn look_up(slot: &OnceLock<Box<[u8]>>, pair: Pair, src: &[u8], dst: &mut [u8]) {
    let n = src.len() / pair.source;
    let table = match slot.get() {
        Some(table) => table,
        None if n >= BUILD_FROM.min(1 << (8 * pair.source)) => slot.get_or_init(|| build(pair)),
        None => return (pair.rules)(src, dst),
    };
    // A copy of a size known at compile time is a move; of a run-time size, a call to memcpy
    // per element (several times slower).
    macro_rules! copy {
        ($($size:literal)*) => {
            match (pair.source, pair.size) {
                $((1, $size) => copy_entries::<1, $size>(table, src, dst),
                  (2, $size) => copy_entries::<2, $size>(table, src, dst),)*
                (source, size) => unreachable!(
                    "table entries of {size} bytes from {source}-byte sources (`looked_up`)"
                ),
            }
        };
    }
    copy!(1 2 4 8 16);
}

/// Writes the `N`-byte entry of each `B`-byte source element of `src` (1 or 2 bytes: its bits
/// index the table) into `dst`.
fn copy_entries<const B: usize, const N: usize>(table: &[u8], src: &[u8], dst: &mut [u8]) {
    let entries = table.as_chunks::<N>().0;
    for (s, d) in src
        .as_chunks::<B>()
        .0
        .iter()
        .zip(dst.as_chunks_mut::<N>().0)
    {
        let index = s
            .iter()
            .rev()
            .fold(0usize, |index, &b| index << 8 | usize::from(b));
        *d = entries[index];
    }
}

/// Every source bit pattern's destination element (by the pair's scalar kernel), in the order of
/// the patterns.
fn build(pair: Pair) -> Box<[u8]> {
    let codes = 1usize << (8 * pair.source);
    let src: Vec<u8> = (0..codes)
        .flat_map(|code| (code as u16).to_le_bytes()[..pair.source].to_vec())
        .collect();
    let mut table = vec![0u8; codes * pair.size].into_boxed_slice();
    (pair.rules)(&src, &mut table);
    table
}
