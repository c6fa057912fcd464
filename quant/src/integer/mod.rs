//! Integer-quantized weights — GPTQ, AWQ, compressed-tensors' `pack-quantized` and
//! `int-quantized` — back to dense floats, bit for bit as each format's own code computes them.
//!
//! Every one of these formats stores, for a `[rows, cols]` weight (rows: output channels), an
//! unsigned code `u` of 2 to 8 bits per element and, per group of columns of a row, a scale `s`
//! and a zero point `z`; the element reads as `s × (u − z)`. They differ in where a code sits
//! ([`IntLayout`]: which dimension is stored first, how codes share an int32 word), in which
//! groups the columns form ([`IntGroups`], or a per-column group index: GPTQ's act-order
//! `g_idx`), and in what a stored zero point means ([`ZeroPoints`]). compressed-tensors stores
//! signed codes as `q + 2^(bits−1)`; the offset is in both `u` and `z`, so `u − z` is its
//! `q − zero_point`, and a symmetric weight's zero is the offset itself.
//!
//! The arithmetic is the references': torch computes `scale * (q - zero)` (GPTQ's and AWQ's
//! `scales[g_idx] * (q - zeros[g_idx])`, compressed-tensors' `(q - zero_point) * scale`) in the
//! scales' dtype — float16 for GPTQ and AWQ, the weight's dtype for compressed-tensors. `u − z`
//! is an integer of at most 9 bits and the scale has at most 24 significant bits in float32, so
//! the float32 product of the scale's value and `u − z` is exact for 16-bit scales and is
//! float32's own product for float32 scales: rounded once to the scale dtype, it is torch's
//! result. Any other output dtype is dtcast's cast of that (the format's own result, then a
//! cast). NaN bits are x86's on every CPU (`arith::mul`).
//!
//! [`dequantize_int_into`] takes the parts as stored; a band of rows of a stored weight is itself
//! a smaller stored weight, whose parts [`IntScheme::band`] says where to read.

mod codes;
#[cfg(target_arch = "x86_64")]
pub(crate) mod columns;
pub(crate) mod lookup;
mod quantize;
#[cfg(test)]
mod tests;

pub(crate) use quantize::integer_bits;
pub use quantize::{pack_zero_points, quantize_int_rows, IntQuantized};

use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{half_value, mul, round_then_cast};
use crate::dequant::check_len;
use crate::scratch::Pooled;
use crate::QuantError;

/// Where a format stores its codes and zero points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IntLayout {
    /// GPTQ (AutoGPTQ, GPTQModel, AutoRound's GPTQ export): `qweight` int32 `[cols·bits/32,
    /// rows]`, codes least significant bits first along the input dimension (3-bit codes cross
    /// words); `qzeros` int32 `[groups, rows·bits/32]` the same way along the rows; `scales`
    /// `[groups, rows]`.
    Gptq,
    /// AutoAWQ's GEMM layout: `qweight` int32 `[cols, rows/8]`, eight 4-bit codes a word in AWQ's
    /// order (output `8j + i` in nibble `[0, 4, 1, 5, 2, 6, 3, 7][i]` of word `j`); `qzeros` int32
    /// `[groups, rows/8]` the same way; `scales` `[groups, rows]`.
    Awq,
    /// compressed-tensors' `pack-quantized`: `weight_packed` int32 `[rows, ⌈cols·bits/32⌉]`,
    /// each row's codes one stream of bits, least significant first, crossing words where the
    /// bits do not divide 32 (the last word of a row padded); `weight_zero_point` int32
    /// `[⌈rows·bits/32⌉, groups]`, each group's zero points such a stream down the rows;
    /// `weight_scale` `[rows, groups]` (`[1]` for one scale per tensor). Codes and zeros are
    /// signed values plus `2^(bits−1)`.
    CompressedTensors,
    /// AutoAWQ's GEMV layout: `qweight` int32 `[rows, cols/8]`, eight 4-bit codes a word in
    /// order (column `8j + i` in nibble `i` of word `j`); `qzeros` int32 `[rows, w]` and `scales`
    /// `[rows, 8w]`, group `g`'s zero in nibble `g % 8` of word `g / 8`, its scale in column `g`,
    /// both padded to `w` words: `⌈⌈groups / 8⌉ / m⌉ · m`, `m` 1, 2 or 4 for groups of 128 or
    /// more, 64, or 32 (AutoAWQ's `calculate_zeros_width`; other sizes it does not store).
    AwqGemv,
    /// One int8 a code, `[rows, cols]` (compressed-tensors' `int-quantized` and
    /// `naive-quantized`): the code is the signed byte plus 128; zero points int8 `[rows,
    /// groups]` likewise; scales as [`CompressedTensors`](IntLayout::CompressedTensors).
    Int8,
}

/// Which columns of a row share a scale and a zero point (unless a per-column group index says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntGroups {
    /// One scale for the whole tensor (compressed-tensors' `tensor` strategy).
    Tensor,
    /// One per row (compressed-tensors' `channel`; GPTQ's `group_size: -1`).
    Channel,
    /// One per `k` consecutive columns of a row, the last group cropped.
    Size(usize),
}

/// What a stored zero point is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroPoints {
    /// None is stored: the zero is the codes' midpoint `2^(bits−1)` (compressed-tensors'
    /// symmetric weights, whose signed codes are offset by it).
    Midpoint,
    /// The stored code is the zero (AWQ, GPTQ's `gptq_v2` checkpoint format,
    /// compressed-tensors' asymmetric weights).
    Stored,
    /// The stored code is the zero minus one, wrapping (GPTQ's `gptq` format, v1): the zero is
    /// `(stored + 1) & (2^bits − 1)`, as every GPTQ kernel reads it.
    StoredMinusOne,
}

/// How an integer-quantized weight is stored and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntScheme {
    /// Where codes and zero points are.
    pub layout: IntLayout,
    /// Bits per code.
    pub bits: u32,
    /// Which columns share a scale.
    pub groups: IntGroups,
    /// What the zero points are.
    pub zeros: ZeroPoints,
    /// The scales' dtype: float16, bfloat16 or float32, and the dtype the product is rounded in.
    pub scale: DType,
}

/// The parts of an integer-quantized weight as stored (all little-endian).
#[derive(Clone, Copy, Debug)]
pub struct IntWeight<'a> {
    /// Rows (output channels) of the dense weight.
    pub rows: usize,
    /// Columns (input features) of the dense weight.
    pub cols: usize,
    /// The codes (`qweight`, `weight_packed`, or int8 `weight`).
    pub codes: &'a [u8],
    /// The scales, in [`IntScheme::scale`].
    pub scales: &'a [u8],
    /// The zero points, where the scheme stores them.
    pub zeros: Option<&'a [u8]>,
    /// A group per column (int32: GPTQ's and compressed-tensors' `g_idx`), if stored; then it,
    /// not [`IntScheme::groups`]' size, says each column's group.
    pub group_index: Option<&'a [u8]>,
}

/// The parts of an [`IntWeight`], by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntPart {
    /// The codes.
    Codes,
    /// The scales.
    Scales,
    /// The zero points.
    Zeros,
    /// The per-column group index (read whole by every band).
    GroupIndex,
}

/// Bytes of a stored part a band reads: `count` pieces of `len` bytes, the first at `start`, each
/// `stride` bytes after the one before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    /// Offset of the first piece in the part.
    pub start: usize,
    /// Bytes per piece.
    pub len: usize,
    /// Bytes from one piece's start to the next's.
    pub stride: usize,
    /// Pieces.
    pub count: usize,
}

impl Strided {
    fn whole(len: usize) -> Strided {
        Strided {
            start: 0,
            len,
            stride: len,
            count: 1,
        }
    }

    /// Bytes read.
    pub fn bytes(&self) -> usize {
        self.len * self.count
    }
}

impl IntScheme {
    /// The bit widths each layout stores (for compressed-tensors, those that fill an int32 word).
    fn bits_accepted(&self) -> &'static [u32] {
        match self.layout {
            IntLayout::Gptq => &[2, 3, 4, 8],
            IntLayout::Awq | IntLayout::AwqGemv => &[4],
            IntLayout::CompressedTensors => &[1, 2, 3, 4, 5, 6, 7, 8],
            IntLayout::Int8 => &[8],
        }
    }

    /// Whether the scheme is one these layouts store, or why not.
    pub fn check(&self) -> Result<(), QuantError> {
        let accepted = self.bits_accepted();
        if !accepted.contains(&self.bits) {
            let list: Vec<String> = accepted.iter().map(u32::to_string).collect();
            return Err(QuantError::Scheme {
                reason: format!(
                    "{} codes of {} bits: this layout stores {} bits",
                    self.layout_name(),
                    self.bits,
                    list.join(", ")
                ),
            });
        }
        if !matches!(
            self.scale,
            DType::Float16 | DType::BFloat16 | DType::Float32
        ) {
            return Err(QuantError::Scheme {
                reason: format!(
                    "{} scales: integer-quantized weights have float16, bfloat16 or float32 scales",
                    self.scale
                ),
            });
        }
        if self.groups == IntGroups::Size(0) {
            return Err(QuantError::Scheme {
                reason: "a group size of 0".to_owned(),
            });
        }
        let stores_zeros = self.zeros != ZeroPoints::Midpoint;
        if matches!(
            self.layout,
            IntLayout::Gptq | IntLayout::Awq | IntLayout::AwqGemv
        ) && !stores_zeros
        {
            return Err(QuantError::Scheme {
                reason: format!("{} stores its zero points", self.layout_name()),
            });
        }
        if self.groups == IntGroups::Tensor && stores_zeros {
            return Err(QuantError::Scheme {
                reason: "zero points with one scale per tensor are not read".to_owned(),
            });
        }
        if self.zeros == ZeroPoints::StoredMinusOne && self.layout != IntLayout::Gptq {
            return Err(QuantError::Scheme {
                reason: "zero points stored minus one are GPTQ's".to_owned(),
            });
        }
        Ok(())
    }

    fn layout_name(&self) -> &'static str {
        match self.layout {
            IntLayout::Gptq => "GPTQ",
            IntLayout::Awq => "AWQ",
            IntLayout::AwqGemv => "AWQ GEMV",
            IntLayout::CompressedTensors => "compressed-tensors pack-quantized",
            IntLayout::Int8 => "int8",
        }
    }

    /// The largest code.
    fn max_code(&self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// Codes per int32 word where codes do not cross words.
    fn per_word(&self) -> usize {
        (32 / self.bits) as usize
    }

    /// Groups a row has (without a group index; with one, what it indexes).
    pub fn group_count(&self, cols: usize) -> usize {
        match self.groups {
            IntGroups::Tensor | IntGroups::Channel => 1,
            IntGroups::Size(k) => cols.div_ceil(k.max(1)),
        }
    }

    /// Band starts are multiples of this many rows, so that every part of a band is whole words.
    pub fn row_alignment(&self) -> usize {
        match self.layout {
            // 3-bit codes fill three words every 32 rows; 2, 4 and 8 bits divide 32.
            IntLayout::Gptq => 32,
            IntLayout::Awq => 8,
            IntLayout::CompressedTensors if self.zeros == ZeroPoints::Midpoint => 1,
            // Zero points run along the rows: a band starts on a word.
            IntLayout::CompressedTensors => (32 / gcd(self.bits, 32)) as usize,
            IntLayout::AwqGemv | IntLayout::Int8 => 1,
        }
    }

    /// AWQ GEMV's words of zero points a row (its scales: eight times as many), for `cols`
    /// columns; `None` for a group size AutoAWQ does not store.
    fn gemv_zero_words(&self, cols: usize) -> Option<usize> {
        let k = match self.groups {
            IntGroups::Size(k) => k,
            IntGroups::Channel => cols,
            IntGroups::Tensor => return None,
        };
        let multiple = match k {
            32 => 4,
            64 => 2,
            k if k >= 128 => 1,
            _ => return None,
        };
        Some(self.group_count(cols).div_ceil(8).div_ceil(multiple) * multiple)
    }

    /// The stored shape of a part of a `[rows, cols]` weight in its elements (int32 words for
    /// packed codes and zeros), or why the weight's shape does not fit the layout.
    pub fn part_shape(
        &self,
        part: IntPart,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<usize>, QuantError> {
        self.check()?;
        check_dims(rows, cols)?;
        let groups = self.group_count(cols);
        let bits = self.bits as usize;
        let shape_error = |what: &str| QuantError::Shape {
            reason: format!("a [{rows}, {cols}] {} weight: {what}", self.layout_name()),
        };
        let words_of = |n: usize, along: &str| {
            if !(n * bits).is_multiple_of(32) {
                Err(shape_error(&format!(
                    "{n} {along} of {bits}-bit codes do not fill whole int32 words"
                )))
            } else {
                Ok(n * bits / 32)
            }
        };
        let scale_shape = |rows_first: bool| match (self.groups, rows_first) {
            (IntGroups::Tensor, true) => vec![1],
            (_, true) => vec![rows, groups],
            (_, false) => vec![groups, rows],
        };
        Ok(match (self.layout, part) {
            (_, IntPart::GroupIndex) => vec![cols],
            (IntLayout::Gptq, IntPart::Codes) => vec![words_of(cols, "columns")?, rows],
            (IntLayout::Gptq, IntPart::Zeros) => vec![groups, words_of(rows, "rows")?],
            (IntLayout::Gptq | IntLayout::Awq, IntPart::Scales) => scale_shape(false),
            (IntLayout::Awq, IntPart::Codes) => vec![cols, words_of(rows, "rows")?],
            (IntLayout::Awq, IntPart::Zeros) => vec![groups, words_of(rows, "rows")?],
            (IntLayout::CompressedTensors, IntPart::Codes) => {
                vec![rows, (cols * bits).div_ceil(32)]
            }
            (IntLayout::CompressedTensors, IntPart::Zeros) => {
                vec![(rows * bits).div_ceil(32), groups]
            }
            (IntLayout::CompressedTensors | IntLayout::Int8, IntPart::Scales) => scale_shape(true),
            (IntLayout::AwqGemv, part) => {
                let words = self.gemv_zero_words(cols).ok_or_else(|| {
                    shape_error(
                        "AutoAWQ's GEMV layout stores groups of 32, 64, or 128 columns or more",
                    )
                })?;
                match part {
                    IntPart::Codes => vec![rows, words_of(cols, "columns")?],
                    IntPart::Zeros => vec![rows, words],
                    IntPart::Scales => vec![rows, 8 * words],
                    IntPart::GroupIndex => vec![cols],
                }
            }
            (IntLayout::Int8, IntPart::Codes) => vec![rows, cols],
            (IntLayout::Int8, IntPart::Zeros) => scale_shape(true),
        })
    }

    /// The bytes of one element of a stored part.
    pub fn part_element_bytes(&self, part: IntPart) -> usize {
        match (self.layout, part) {
            (_, IntPart::Scales) => self.scale.byte_size().unwrap_or(4),
            (IntLayout::Int8, IntPart::Codes | IntPart::Zeros) => 1,
            _ => 4,
        }
    }

    /// The dtype a stored part is in.
    pub fn part_dtype(&self, part: IntPart) -> DType {
        match (self.layout, part) {
            (_, IntPart::Scales) => self.scale,
            (IntLayout::Int8, IntPart::Codes | IntPart::Zeros) => DType::Int8,
            _ => DType::Int32,
        }
    }

    /// Whether the scheme stores zero points.
    pub fn stores_zeros(&self) -> bool {
        self.zeros != ZeroPoints::Midpoint
    }

    /// The bytes of `part` that rows `first..end` of a `[rows, cols]` weight read (`first` a
    /// multiple of [`row_alignment`](IntScheme::row_alignment), `end` too or `rows`): laid out
    /// one piece after another, they are that part of a `[end − first, cols]` weight.
    pub fn band(
        &self,
        part: IntPart,
        rows: usize,
        cols: usize,
        first: usize,
        end: usize,
    ) -> Result<Strided, QuantError> {
        let shape = self.part_shape(part, rows, cols)?;
        let size = self.part_element_bytes(part);
        let count = end - first;
        let whole = |s: &[usize]| Strided::whole(s.iter().product::<usize>() * size);
        let bits = self.bits as usize;
        // Pieces along a stored dimension of rows (the last of the part: columns of the matrix).
        let across = |per_row_bytes_num: usize, per_row_bytes_den: usize, pieces: usize| Strided {
            start: first * per_row_bytes_num / per_row_bytes_den,
            len: count * per_row_bytes_num / per_row_bytes_den,
            stride: rows * per_row_bytes_num / per_row_bytes_den,
            count: pieces,
        };
        // Whole stored rows `from..to` of a part stored rows first.
        let rows_first = |from: usize, to: usize, row_bytes: usize| Strided {
            start: from * row_bytes,
            len: (to - from) * row_bytes,
            stride: (to - from) * row_bytes,
            count: 1,
        };
        Ok(match (self.layout, part) {
            (_, IntPart::GroupIndex) => whole(&shape),
            (IntLayout::CompressedTensors | IntLayout::Int8, IntPart::Scales)
                if self.groups == IntGroups::Tensor =>
            {
                whole(&shape)
            }
            (IntLayout::Gptq, IntPart::Codes) => across(4, 1, shape[0]),
            (IntLayout::Gptq, IntPart::Zeros) => across(bits * 4, 32, shape[0]),
            (IntLayout::Gptq | IntLayout::Awq, IntPart::Scales) => across(size, 1, shape[0]),
            (IntLayout::Awq, IntPart::Codes | IntPart::Zeros) => across(4, 8, shape[0]),
            (IntLayout::CompressedTensors | IntLayout::Int8, IntPart::Codes | IntPart::Scales)
            | (IntLayout::AwqGemv, _) => rows_first(first, end, shape[1] * size),
            (IntLayout::CompressedTensors, IntPart::Zeros) => {
                rows_first(first * bits / 32, (end * bits).div_ceil(32), shape[1] * 4)
            }
            (IntLayout::Int8, IntPart::Zeros) => rows_first(first, end, shape[1]),
        })
    }
}

/// An error unless every size computed from a `[rows, cols]` shape fits in memory's addresses:
/// each dimension, and the elements, times 32 (the bits of a word, the bytes of the widest
/// buffer per element), so that no product of them overflows.
pub(crate) fn check_dims(rows: usize, cols: usize) -> Result<(), QuantError> {
    let fits = rows.checked_mul(32).is_some()
        && cols.checked_mul(32).is_some()
        && rows
            .checked_mul(cols)
            .and_then(|n| n.checked_mul(32))
            .is_some();
    if fits {
        Ok(())
    } else {
        Err(QuantError::Shape {
            reason: format!("a [{rows}, {cols}] weight has more elements than memory can hold"),
        })
    }
}

/// Rows per piece a thread dequantizes at a time (about this many elements).
const PIECE_ELEMENTS: usize = 1 << 14;

/// The dense `[rows, cols]` weight of `w` in `dst` (float32, bfloat16 or float16; exactly its
/// bytes), bit for bit as the format's own code computes it in the scales' dtype and then cast to
/// `out`.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize_int_into, IntGroups, IntLayout, IntScheme, IntWeight, ZeroPoints};
/// // compressed-tensors, 4 bits, symmetric, one scale a row: a [1, 8] weight whose word holds
/// // the codes 0, 1, ..., 7 (least significant first), signed q = code - 8; scale 0.5
/// // (bfloat16 0x3F00): the products 0.5 × (-8), 0.5 × (-7), ...
/// let scheme = IntScheme { layout: IntLayout::CompressedTensors, bits: 4,
///                          groups: IntGroups::Channel, zeros: ZeroPoints::Midpoint,
///                          scale: DType::BFloat16 };
/// let codes = 0x7654_3210u32.to_le_bytes();
/// let w = IntWeight { rows: 1, cols: 8, codes: &codes, scales: &[0x00, 0x3F],
///                     zeros: None, group_index: None };
/// let mut dense = [0u8; 32];
/// dequantize_int_into(&w, &scheme, DType::Float32, &mut dense)?;
/// let values: Vec<f32> = dense.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
/// assert_eq!(values, [-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn dequantize_int_into(
    w: &IntWeight,
    scheme: &IntScheme,
    out: DType,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    dequantize_with(w, scheme, out, dst, true)
}

/// [`dequantize_int_into`], by the one-pass form where it serves and `one_pass` allows it (the
/// tests compare the two).
pub(crate) fn dequantize_with(
    w: &IntWeight,
    scheme: &IntScheme,
    out: DType,
    dst: &mut [u8],
    one_pass: bool,
) -> Result<(), QuantError> {
    if !matches!(out, DType::Float32 | DType::BFloat16 | DType::Float16) {
        return Err(QuantError::OutputDType { dtype: out });
    }
    let (rows, cols) = (w.rows, w.cols);
    let parts = checked_parts(w, scheme)?;
    let n = rows.checked_mul(cols).ok_or_else(|| QuantError::Shape {
        reason: format!("a [{rows}, {cols}] weight has more elements than memory can hold"),
    })?;
    let out_size = out.byte_size().unwrap_or(4);
    check_len("output", n * out_size, dst.len())?;
    if n == 0 {
        return Ok(());
    }
    let through = (out != scheme.scale).then_some(scheme.scale);
    // 4-bit codes in runs of 32 that share a scale: the one-pass lookup (`lookup.rs`).
    let run = match scheme.groups {
        IntGroups::Tensor | IntGroups::Channel => cols,
        IntGroups::Size(k) => k,
    };
    let one_pass_allowed = one_pass;
    let one_pass = one_pass
        && scheme.bits == 4
        && parts.group_index.is_none()
        && cols % 32 == 0
        && run % 32 == 0
        && scheme.layout != IntLayout::Int8;
    // A group per column (act-order) and codes of at most 4 bits: each row's groups' outputs
    // once, then a lookup per element.
    let by_index = one_pass_allowed && scheme.bits <= 4 && parts.group_index.is_some();
    // Weights without a one-pass lookup (act-order, 2 and 8 bits) of GPTQ: by columns.
    #[cfg(target_arch = "x86_64")]
    let by_columns = one_pass_allowed && !one_pass && columns::reads(scheme, out);
    #[cfg(not(target_arch = "x86_64"))]
    let by_columns = false;
    // Pieces of rows for the thread pool: about PIECE_ELEMENTS (the one-pass forms' own, larger,
    // to spread each piece's casts of its tables), and for the one-pass form of the
    // transposed layouts many whole cache lines of their words at each page they visit (GPTQ:
    // 128 rows of a word row; AWQ: 64 word columns, 512 rows; fewer rows touched every page of
    // the weight once per few lines: 0.62× and 0.54× memcpy instead of 0.83× and 0.66×).
    let piece_rows = match (one_pass || by_index || by_columns, scheme.layout) {
        (true, IntLayout::Gptq) => (lookup::PIECE_ELEMENTS / cols).max(1).next_multiple_of(128),
        (true, IntLayout::Awq) => 512,
        (true, _) => (lookup::PIECE_ELEMENTS / cols).max(1),
        // (GPTQ's general path transposes too: 128 rows are 512 bytes of each word row.)
        (false, IntLayout::Gptq) => (PIECE_ELEMENTS / cols).max(1).next_multiple_of(128),
        (false, _) => (PIECE_ELEMENTS / cols).max(1),
    };
    dst.par_chunks_mut(piece_rows * cols * out_size)
        .enumerate()
        .try_for_each_init(
            || Pooled::take(&SCRATCH),
            |s: &mut Pooled<Scratch>, (p, dst)| -> Result<(), QuantError> {
                let s: &mut Scratch = s;
                let first = p * piece_rows;
                let count = dst.len() / out_size / cols;
                #[cfg(target_arch = "x86_64")]
                {
                    let (piece, kernel) = ((first, count), columns::Kernel::best());
                    let c = &mut s.columns;
                    if by_columns
                        && columns::dequantize(&parts, scheme, piece, out, dst, c, kernel)?
                    {
                        return Ok(());
                    }
                }
                if one_pass {
                    group_outputs(&parts, scheme, first..first + count, cols / run, 16, s);
                    s.tables.build(&s.values, through, out, run / 32)?;
                    let streams =
                        codes::nibbles(&parts, scheme, first, count, &mut s.codes, &mut s.words);
                    lookup::dequantize(streams, &s.tables, out, dst);
                    return Ok(());
                }
                if let (true, Some(index)) = (by_index, &parts.group_index) {
                    // Act-order: each row's groups' outputs, then every element looked up by
                    // its column's group and its code.
                    let entries = 1usize << scheme.bits;
                    let rows = first..first + count;
                    group_outputs(&parts, scheme, rows, parts.groups, entries, s);
                    s.tables.build(&s.values, through, out, 1)?;
                    let row_entries = parts.groups * entries;
                    if scheme.bits == 4 && cols % 8 == 0 && scheme.layout != IntLayout::Int8 {
                        // (4 bits: the rows' nibble streams, as the one-pass form reads them.)
                        let streams = codes::nibbles(
                            &parts,
                            scheme,
                            first,
                            count,
                            &mut s.codes,
                            &mut s.words,
                        );
                        lookup::by_index4(streams, index, &s.tables, row_entries, out_size, dst);
                        return Ok(());
                    }
                    s.codes.resize(count * cols, 0);
                    codes::fill(&parts, scheme, first, count, &mut s.codes, &mut s.words);
                    lookup::by_index(
                        &s.codes,
                        index,
                        scheme.bits,
                        &s.tables,
                        row_entries,
                        out_size,
                        dst,
                    );
                    return Ok(());
                }
                s.codes.resize(count * cols, 0);
                codes::fill(&parts, scheme, first, count, &mut s.codes, &mut s.words);
                s.values.resize(count * cols, 0.0);
                for r in 0..count {
                    let at = r * cols..(r + 1) * cols;
                    products(
                        &parts,
                        scheme,
                        first + r,
                        &s.codes[at.clone()],
                        &mut s.values[at],
                    );
                }
                let values: &[u8] = bytemuck::cast_slice(&s.values);
                // Rounded once in the scales' dtype (torch's product), then cast to `out`.
                round_then_cast(values, through, out, dst, &mut s.rounded)?;
                Ok(())
            },
        )
}

std::thread_local! {
    /// Each thread's [`Scratch`]es, reused.
    static SCRATCH: std::cell::RefCell<Vec<Scratch>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread's buffers.
#[derive(Default)]
struct Scratch {
    codes: Vec<u8>,
    /// A group's scales for a piece's rows, widened (`group_outputs`).
    row_scales: Vec<f32>,
    values: Vec<f32>,
    rounded: Vec<u8>,
    words: Vec<u32>,
    tables: lookup::Tables,
    #[cfg(target_arch = "x86_64")]
    columns: columns::Scratch,
}

/// The `entries` outputs (one per code) of each of the `groups` groups of each row of `rows`
/// into `s.values`, row by row and group by group as the tables take them: each code's product
/// as [`products`] makes it. GPTQ's and AWQ's scales run along the rows: there each group's
/// scales for the rows are one run, widened at once, and the rows' zeros read beside them.
fn group_outputs(
    parts: &Parts,
    scheme: &IntScheme,
    rows: std::ops::Range<usize>,
    groups: usize,
    entries: usize,
    s: &mut Scratch,
) {
    let count = rows.len();
    let n = count * groups * entries;
    // (Every entry is written below: the buffer is zeroed only when its size changes.)
    if s.values.len() != n {
        s.values.clear();
        s.values.resize(n, 0.0);
    }
    let mut fill = |i: usize, g: usize, zero: i32, scale: f32| {
        let at = (i * groups + g) * entries;
        fill_products(&mut s.values[at..at + entries], zero, scale);
    };
    if !matches!(scheme.layout, IntLayout::Gptq | IntLayout::Awq) {
        for (i, r) in rows.enumerate() {
            for g in 0..groups {
                let (scale, zero) = parts.factor(scheme, r, g);
                fill(i, g, zero, scale);
            }
        }
        return;
    }
    let size = scheme.scale.byte_size().unwrap_or(4);
    for g in 0..groups {
        let at = (g * parts.rows + rows.start) * size;
        let stored = &parts.scales[at..at + count * size];
        s.row_scales.clear();
        (s.row_scales).extend(
            stored
                .chunks_exact(size)
                .map(|b| scale_value(b, scheme.scale)),
        );
        for (i, &scale) in s.row_scales.iter().enumerate() {
            fill(i, g, parts.zero(scheme, rows.start + i, g), scale);
        }
    }
}

/// A stored scale's value: float32, or bfloat16 / float16 (`dtype`), little-endian.
#[inline(always)]
fn scale_value(b: &[u8], dtype: DType) -> f32 {
    match dtype {
        DType::Float32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        dtype => half_value(u16::from_le_bytes([b[0], b[1]]), dtype),
    }
}

/// `out[u]` = the product of `u − zero` and `scale` for each code `u`, as [`table_product`].
#[inline(always)]
fn fill_products(out: &mut [f32], zero: i32, scale: f32) {
    if scale.is_nan() {
        out.fill(table_product(0, scale));
    } else {
        // No NaN operand: x86's product (inf × 0 its default NaN), as `mul` gives it.
        for (u, o) in out.iter_mut().enumerate() {
            *o = crate::arith::as_on_x86((u as i32 - zero) as f32 * scale);
        }
    }
}

/// One element's product `s × (u − z)` as [`products`] makes it (`d`: `u − z`).
#[inline(always)]
fn table_product(d: i32, s: f32) -> f32 {
    mul(d as f32, s)
}

/// The parts of a weight, checked against the scheme and the shape; the group index read.
pub(crate) struct Parts<'a> {
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) codes: &'a [u8],
    /// The scales as stored (read where a piece needs them: no tensor-sized buffer).
    scales: &'a [u8],
    /// The zero points as stored, where the scheme stores them.
    zeros: Option<&'a [u8]>,
    pub(crate) group_index: Option<Vec<u32>>,
    pub(crate) groups: usize,
    /// Scales a stored row of the scales holds (AWQ GEMV pads them; the others: `groups`).
    pub(crate) row_scales: usize,
}

impl Parts<'_> {
    /// The scale of `group` in `row` and its zero code.
    #[inline(always)]
    fn factor(&self, scheme: &IntScheme, row: usize, group: usize) -> (f32, i32) {
        let size = scheme.scale.byte_size().unwrap_or(4);
        let at = size * self.at(scheme, row, group);
        let scale = scale_value(&self.scales[at..at + size], scheme.scale);
        (scale, self.zero(scheme, row, group))
    }

    /// The zero code of `group` in `row`.
    #[inline(always)]
    fn zero(&self, scheme: &IntScheme, row: usize, group: usize) -> i32 {
        match (scheme.zeros, self.zeros) {
            (ZeroPoints::Stored, Some(z)) => codes::zero(z, scheme, self, row, group),
            (ZeroPoints::StoredMinusOne, Some(z)) => {
                let stored = codes::zero(z, scheme, self, row, group);
                (stored + 1) & scheme.max_code() as i32
            }
            _ => 1 << (scheme.bits - 1),
        }
    }

    /// Index of the scale (and zero) of `group` in `row`.
    #[inline(always)]
    fn at(&self, scheme: &IntScheme, row: usize, group: usize) -> usize {
        match (scheme.layout, scheme.groups) {
            (IntLayout::CompressedTensors | IntLayout::Int8, IntGroups::Tensor) => 0,
            (IntLayout::CompressedTensors | IntLayout::Int8, _) => row * self.groups + group,
            (IntLayout::Gptq | IntLayout::Awq, _) => group * self.rows + row,
            (IntLayout::AwqGemv, _) => row * self.row_scales + group,
        }
    }
}

fn checked_parts<'a>(w: &IntWeight<'a>, scheme: &IntScheme) -> Result<Parts<'a>, QuantError> {
    scheme.check()?;
    let (rows, cols) = (w.rows, w.cols);
    let bytes_of = |part: IntPart| -> Result<usize, QuantError> {
        let shape = scheme.part_shape(part, rows, cols)?;
        (shape
            .iter()
            .try_fold(scheme.part_element_bytes(part), |a, &d| a.checked_mul(d)))
        .ok_or_else(|| QuantError::Shape {
            reason: format!("a [{rows}, {cols}] weight has more elements than memory can hold"),
        })
    };
    check_len("codes", bytes_of(IntPart::Codes)?, w.codes.len())?;
    check_len("scales", bytes_of(IntPart::Scales)?, w.scales.len())?;
    let groups = scheme.group_count(cols);
    let group_index = match w.group_index {
        None => None,
        Some(g) => {
            check_len("group index", bytes_of(IntPart::GroupIndex)?, g.len())?;
            let index: Vec<u32> = (g.chunks_exact(4))
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u32)
                .collect();
            read_group_index(index, scheme, groups)?
        }
    };
    match (scheme.zeros, w.zeros) {
        (ZeroPoints::Midpoint, None) => {}
        (ZeroPoints::Midpoint, Some(_)) => {
            return Err(QuantError::Scheme {
                reason: "zero points were given for a symmetric scheme".to_owned(),
            })
        }
        (_, None) => {
            return Err(QuantError::Scheme {
                reason: "the scheme stores zero points, and none were given".to_owned(),
            })
        }
        (_, Some(z)) => check_len("zero points", bytes_of(IntPart::Zeros)?, z.len())?,
    }
    Ok(Parts {
        rows,
        cols,
        codes: w.codes,
        scales: w.scales,
        zeros: w.zeros,
        group_index,
        groups,
        row_scales: match scheme.layout {
            IntLayout::AwqGemv => scheme.part_shape(IntPart::Scales, rows, cols)?[1],
            _ => groups,
        },
    })
}

/// The group index as the format reads it: every entry in range; compressed-tensors' (its
/// `_process_group`) also reads an index holding -1 (as `apply_quantization_config` registers it,
/// before calibration) as column order, and otherwise gives column `c` the scale of its position
/// in the columns sorted by index, in groups of `group_size` — which is the scale of its index
/// only where each group holds `group_size` columns, as act-order's `g_idx` does
/// (`perm.argsort() // group_size`). Any other index has no one meaning (torch's sort need not
/// be stable), so it is refused.
fn read_group_index(
    index: Vec<u32>,
    scheme: &IntScheme,
    groups: usize,
) -> Result<Option<Vec<u32>>, QuantError> {
    let compressed_tensors = scheme.layout == IntLayout::CompressedTensors;
    if compressed_tensors && index.contains(&u32::MAX) {
        return Ok(None);
    }
    if let Some((c, &g)) = index
        .iter()
        .enumerate()
        .find(|(_, &g)| g as usize >= groups)
    {
        return Err(QuantError::Shape {
            reason: format!(
                "the group index of column {c} is {}, but the weight has {groups} groups \
                 (0 to {})",
                g as i32,
                groups - 1
            ),
        });
    }
    if let (true, IntGroups::Size(k)) = (compressed_tensors, scheme.groups) {
        let mut count = vec![0usize; groups];
        for &g in &index {
            count[g as usize] += 1;
        }
        let expected = |g: usize| k.min(index.len() - g * k);
        if let Some(g) = (0..groups).find(|&g| count[g] != expected(g)) {
            return Err(QuantError::Shape {
                reason: format!(
                    "`weight_g_idx` gives group {g} {} columns; compressed-tensors reads an \
                     act-order index only where each group has its {} (group_size {k})",
                    count[g],
                    expected(g)
                ),
            });
        }
    }
    Ok(Some(index))
}

/// One row's float32 products `s × (u − z)` from its codes.
fn products(parts: &Parts, scheme: &IntScheme, row: usize, codes: &[u8], out: &mut [f32]) {
    let factor = |g: usize| parts.factor(scheme, row, g);
    match &parts.group_index {
        Some(index) => {
            for ((o, &u), &g) in out.iter_mut().zip(codes).zip(index) {
                let (s, z) = factor(g as usize);
                *o = mul((i32::from(u) - z) as f32, s);
            }
        }
        None => {
            let run = match scheme.groups {
                IntGroups::Tensor | IntGroups::Channel => parts.cols,
                IntGroups::Size(k) => k,
            };
            for (g, (o, u)) in out.chunks_mut(run).zip(codes.chunks(run)).enumerate() {
                let (s, z) = factor(g);
                if s.is_nan() || s.is_infinite() {
                    for (o, &u) in o.iter_mut().zip(u) {
                        *o = mul((i32::from(u) - z) as f32, s);
                    }
                } else {
                    // A finite scale: no NaN can arise; the loop LLVM vectorises.
                    for (o, &u) in o.iter_mut().zip(u) {
                        *o = (i32::from(u) - z) as f32 * s;
                    }
                }
            }
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
