//! GPTQ dequantized in the orientation it stores: `qweight` (`[cols·bits/32, rows]`) keeps each
//! input column's codes across the output rows in one run of words, and `scales` and `qzeros`
//! each group's across the rows. So for one column the products of 16 or 32 rows are one or two
//! vector operations against its group's scales, whichever group the column is in, and 16
//! columns' products, transposed in registers, are those rows' outputs. This is the form for
//! the weights the one-pass lookups (`lookup.rs`) do not take: act-order's `g_idx`, whose
//! row-major lookups gather one output at a time, and 2- and 8-bit codes, which have no lookup.
//!
//! A piece's `count` rows are its lanes. The products are exact in float32 (a float16 scale
//! times a code difference of at most 9 bits, that difference made exactly as the difference
//! of two floats `2^23 + u` and `2^23 + z`); rounded to float16 they are the general path's
//! (torch's) results, and bfloat16 is that value rounded once more, to nearest even — the
//! general path's two casts. That holds for finite scales: a piece with an infinite or NaN one
//! is left to the other paths, as are other scales' dtypes, float32 outputs, and pieces whose
//! rows or columns do not make whole tiles. (x86-64 only: the kernels are AVX2's and
//! AVX-512's.)

use dtcast_dtype::DType;

use super::{IntGroups, IntLayout, IntScheme, Parts, ZeroPoints};
use crate::arith::f16_value;
use crate::QuantError;

/// Columns a pass covers (each row's outputs: two cache lines of 16-bit outputs).
const BLOCK_COLUMNS: usize = 64;

/// The bits of 2^23 as float32: a code (or zero) of at most 8 bits set in them is 2^23 plus it,
/// so the difference of two such floats is the difference of the codes, exactly.
pub(crate) const BIAS: u32 = 0x4B00_0000;

/// Whether this form can read `scheme` into `out` on this CPU: GPTQ's codes that fill their
/// words (2, 4 or 8 bits), float16 scales, 16-bit outputs, AVX2 (with F16C) or AVX-512.
pub(super) fn reads(scheme: &IntScheme, out: DType) -> bool {
    let isa = crate::lookup4::avx2() || crate::lookup4::avx512();
    scheme.layout == IntLayout::Gptq
        && 32 % scheme.bits == 0
        && isa
        && scheme.scale == DType::Float16
        && matches!(out, DType::BFloat16 | DType::Float16)
}

/// Where each of a pass's columns has its codes and scales.
pub(crate) struct Columns<'a> {
    /// The word (int32 index into the codes) of the column's first row.
    pub(crate) word: &'a [usize],
    /// How far up its word each of the column's codes is.
    pub(crate) shift: &'a [u32],
    /// Where the column's group's lanes start in the scales and zeros.
    pub(crate) group: &'a [usize],
}

/// 16 or 32 lanes of a piece, as the kernels read them: lane `lane + j` of a column is the code
/// `shift` bits up its word `word + lane_word + j` of `codes` (masked by `mask`), with its
/// group's scale and zero at `group + lane + j` of `scales` and `zeros`; its outputs go to
/// `rows[j]`, one of 2 bytes a column of the pass.
pub(crate) struct LaneTile {
    pub(crate) codes: *const u8,
    pub(crate) lane_word: usize,
    pub(crate) mask: u32,
    pub(crate) scales: *const f32,
    /// Each zero `z` as the float32 whose bits are [`BIAS`] `+ z` (2^23 + z).
    pub(crate) zeros: *const f32,
    pub(crate) lane: usize,
    pub(crate) rows: [*mut u8; 32],
    /// Whether the outputs are streamed past the caches (each row's pass of outputs on whole
    /// 64-byte lines; the piece is fenced once written).
    pub(crate) stream: bool,
}

/// A thread's buffers for [`dequantize`].
#[derive(Default)]
pub(super) struct Scratch {
    /// Each group's scales and (biased) zeros for the piece's lanes, group after group.
    scales: Vec<f32>,
    zeros: Vec<f32>,
    /// Each column's first word, shift and group's first lane.
    word: Vec<usize>,
    shift: Vec<u32>,
    group: Vec<usize>,
}

/// The kernels of this form, by instruction set (the tests run each one the CPU has).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// AVX2 with F16C: 16 lanes a tile.
    Avx2,
    /// AVX-512 F, BW and VL: 32 lanes a tile.
    Avx512,
    /// AVX-512 with AVX512_BF16's rounding into bfloat16.
    Avx512Bf16,
}

impl Kernel {
    /// The best this CPU runs (where [`reads`] is true).
    pub(super) fn best() -> Kernel {
        if crate::lookup4::avx512_bf16() {
            Kernel::Avx512Bf16
        } else if crate::lookup4::avx512() {
            Kernel::Avx512
        } else {
            Kernel::Avx2
        }
    }
}

/// Rows `first..first + count` of a weight this form [`reads`] into `dst` (those rows of `out`)
/// by `kernel` (a set the CPU runs), as the general path makes them — or `false`, leaving `dst`
/// to the other paths, where the piece is not one this form takes (see the module's docs).
pub(super) fn dequantize(
    parts: &Parts,
    scheme: &IntScheme,
    (first, count): (usize, usize),
    out: DType,
    dst: &mut [u8],
    s: &mut Scratch,
    kernel: Kernel,
) -> Result<bool, QuantError> {
    let (rows, cols) = (parts.rows, parts.cols);
    if !count.is_multiple_of(16) || !cols.is_multiple_of(32) {
        return Ok(false);
    }
    if !widen_factors(parts, scheme, (first, count), s) {
        return Ok(false);
    }
    // (Indices by shifts and running counts: a division a column, at tens of cycles each,
    // cost more than the kernels.) Codes a word: a power of two (2, 4 or 8 bits).
    let per_log2 = scheme.per_word().trailing_zeros();
    let bits = scheme.bits;
    let size = match scheme.groups {
        IntGroups::Size(k) => k,
        IntGroups::Tensor | IntGroups::Channel => cols,
    };
    s.word.clear();
    s.shift.clear();
    s.group.clear();
    let (mut g, mut in_group) = (0, 0);
    for c in 0..cols {
        if in_group == size {
            (g, in_group) = (g + 1, 0);
        }
        in_group += 1;
        let g = parts
            .group_index
            .as_ref()
            .map_or(g, |index| index[c] as usize);
        s.word.push((c >> per_log2) * rows);
        s.shift.push(bits * (c & ((1 << per_log2) - 1)) as u32);
        s.group.push(g * count);
    }
    // Every word a lane reads is one of the codes; every row written is in `dst`.
    let last_word = s.word.last().copied().unwrap_or(0) + first + count;
    assert!(parts.codes.len() >= 4 * last_word && dst.len() >= count * cols * 2);
    let out_ptr = dst.as_mut_ptr();
    let lanes = if kernel != Kernel::Avx2 && count.is_multiple_of(32) {
        32
    } else {
        16
    };
    let passes = passes(out_ptr as usize, cols);
    for (i, &(c0, width, stream)) in passes.iter().enumerate() {
        if let Some(&(next, width, _)) = passes.get(i + 1) {
            prefetch_words(parts, scheme, (first, count), next..next + width);
        }
        let columns = Columns {
            word: &s.word[c0..c0 + width],
            shift: &s.shift[c0..c0 + width],
            group: &s.group[c0..c0 + width],
        };
        for p in (0..count).step_by(lanes) {
            let tile = LaneTile {
                codes: parts.codes.as_ptr(),
                lane_word: first + p,
                mask: scheme.max_code(),
                scales: s.scales.as_ptr(),
                zeros: s.zeros.as_ptr(),
                lane: p,
                rows: core::array::from_fn(|j| {
                    out_ptr.wrapping_add(((p + j % lanes) * cols + c0) * 2)
                }),
                stream,
            };
            // SAFETY: AVX2 with F16C, or AVX-512 (`reads`; AVX512_BF16 where asked); each
            // column's lanes `p..p + lanes` read words `word + first + p..` below `last_word`
            // (asserted), scales and zeros of their group's lanes (`widen_factors` made
            // `groups · count`); the rows' outputs `c0..c0 + width` are within `dst` (each row
            // of the piece is), on whole 64-byte lines where streamed (`passes`); every scale is
            // finite (`widen_factors`).
            unsafe {
                use crate::x86::columns as kernels;
                match (kernel, lanes, out == DType::BFloat16) {
                    (Kernel::Avx512Bf16, 32, true) => kernels::lanes32_avx512_bf16(&tile, &columns),
                    (_, 32, true) => kernels::lanes32_avx512::<true>(&tile, &columns),
                    (_, 32, false) => kernels::lanes32_avx512::<false>(&tile, &columns),
                    (_, _, true) => kernels::lanes16::<true>(&tile, &columns),
                    (_, _, false) => kernels::lanes16::<false>(&tile, &columns),
                }
            }
        }
    }
    crate::lookup4::store_fence();
    Ok(true)
}

/// Each group's scales and zeros for the piece's rows, as the kernels read them; `false` if a
/// scale is not finite.
fn widen_factors(
    parts: &Parts,
    scheme: &IntScheme,
    (first, count): (usize, usize),
    s: &mut Scratch,
) -> bool {
    let rows = parts.rows;
    let lanes = parts.groups * count;
    s.scales.resize(lanes, 0.0);
    s.zeros.resize(lanes, 0.0);
    let (mask, bits) = (scheme.max_code(), scheme.bits as usize);
    let per_log2 = scheme.per_word().trailing_zeros();
    let minus_one = u32::from(scheme.zeros == ZeroPoints::StoredMinusOne);
    let z = parts.zeros.unwrap_or(&[]);
    for g in 0..parts.groups {
        let stored = &parts.scales[(g * rows + first) * 2..(g * rows + first + count) * 2];
        let scales = &mut s.scales[g * count..(g + 1) * count];
        for (scale, b) in scales.iter_mut().zip(stored.chunks_exact(2)) {
            *scale = f16_value(u16::from_le_bytes([b[0], b[1]]));
        }
        if !scales.iter().all(|s| s.is_finite()) {
            return false;
        }
        // The zeros run along the rows as the codes do along the columns.
        let zeros = &mut s.zeros[g * count..(g + 1) * count];
        for (p, zero) in zeros.iter_mut().enumerate() {
            let row = first + p;
            let word = 4 * (g * (rows * bits / 32) + (row >> per_log2));
            let stored = u32::from_le_bytes([z[word], z[word + 1], z[word + 2], z[word + 3]]);
            let shift = bits * (row & ((1 << per_log2) - 1));
            let code = (((stored >> shift) & mask) + minus_one) & mask;
            *zero = f32::from_bits(BIAS + code);
        }
    }
    true
}

/// The passes over a piece's columns (first column, columns, streamed) for outputs at `address`.
/// Streaming stores (which spare memory the read of each output line before it is written)
/// need whole lines: `cols` is a multiple of 32, so every row's outputs share the piece's
/// offset in a 64-byte line. Where it is not 0, a pass of 32 columns at each end with plain
/// stores, and the streamed passes between overlap them (the overlap is written twice, with
/// the same bytes).
fn passes(address: usize, cols: usize) -> Vec<(usize, usize, bool)> {
    let blocks = |from: usize, stream: bool| {
        (from..cols.saturating_sub(31))
            .step_by(BLOCK_COLUMNS)
            .map(move |c0| {
                let width = if c0 + BLOCK_COLUMNS <= cols {
                    BLOCK_COLUMNS
                } else {
                    32
                };
                (c0, width, stream)
            })
    };
    let offset = address % 64;
    if !offset.is_multiple_of(2) {
        // (Two-byte outputs off an even address: no line is whole.)
        return blocks(0, false).collect();
    }
    let aligned_from = (64 - offset) % 64 / 2;
    let mut passes: Vec<_> = blocks(aligned_from, true).collect();
    if aligned_from != 0 {
        passes.insert(0, (0, 32, false));
        passes.push((cols - 32, 32, false));
    }
    passes
}

/// Asks for the words of the piece's columns `next`: each word row's run is short and far from
/// the others, which the hardware's prefetchers do not foresee.
fn prefetch_words(
    parts: &Parts,
    scheme: &IntScheme,
    (first, count): (usize, usize),
    next: std::ops::Range<usize>,
) {
    let per = scheme.per_word();
    for word_row in next.start / per..next.end.div_ceil(per) {
        let at = 4 * (word_row * parts.rows + first);
        crate::simd::prefetch(&parts.codes[at..at + 4 * count]);
    }
}
