//! bitsandbytes' formats back to dense floats, as `bitsandbytes.functional` computes them.
//!
//! **4-bit (NF4, FP4)**: the weight, flattened row-major, is stored two codes a byte, the first
//! in the high nibble; each block of `blocksize` elements has a float32 `absmax`, and a code
//! reads as `quant_map[code] × absmax` in float32 (the `quant_map` is stored beside the weight:
//! NF4's or FP4's sixteen values), rounded once to the weight's dtype. With double quantization
//! the absmaxes are themselves one byte each: `nested_quant_map[byte] × nested_absmax[block of
//! nested_blocksize] + offset`, all in float32.
//!
//! **LLM.int8**: an int8 weight with a float32 `SCB` per row (its absmax); an element reads as
//! `q × SCB × (1/127)` in float32, multiplied in that order (`int8_vectorwise_dequant`).

use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{f32s, mul, round_then_cast};
use crate::dequant::check_len;
use crate::integer::lookup::Tables;
use crate::scratch::Pooled;

/// A thread's buffers for 4-bit pieces.
#[derive(Default)]
struct Scratch {
    values: Vec<f32>,
    rounded: Vec<u8>,
    tables: Tables,
    swapped: Vec<u8>,
}

std::thread_local! {
    /// Each thread's [`Scratch`]es, reused.
    static SCRATCH: std::cell::RefCell<Vec<Scratch>> = const { std::cell::RefCell::new(Vec::new()) };
}
use crate::QuantError;

/// How a bitsandbytes 4-bit weight is stored (its `quant_state`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bnb4Scheme {
    /// Elements per absmax.
    pub blocksize: usize,
    /// Double quantization: absmaxes per nested absmax, and the offset added back.
    pub nested: Option<(usize, f32)>,
    /// The weight's dtype (`quant_state.dtype`): the product is rounded in it.
    pub dtype: DType,
}

/// The parts of a bitsandbytes 4-bit weight (a piece of it: whole blocks from its start, or from
/// a block boundary — whole nested blocks too, with double quantization).
#[derive(Clone, Copy, Debug)]
pub struct Bnb4Weight<'a> {
    /// Elements.
    pub elements: usize,
    /// The packed codes (`⌈elements/2⌉` bytes).
    pub codes: &'a [u8],
    /// The sixteen float32 values of the codes.
    pub quant_map: &'a [u8],
    /// float32 absmaxes, or one byte each with double quantization.
    pub absmax: &'a [u8],
    /// Double quantization: the float32 nested absmaxes and the 256 float32 values of the
    /// absmax bytes.
    pub nested: Option<(&'a [u8], &'a [u8])>,
}

impl Bnb4Scheme {
    /// The elements a piece of the weight starts at a multiple of.
    pub fn element_alignment(&self) -> usize {
        self.blocksize * self.nested.map_or(1, |(n, _)| n)
    }

    /// Whether the scheme is one bitsandbytes writes, or why not.
    pub fn check(&self) -> Result<(), QuantError> {
        if self.blocksize == 0 || self.nested.is_some_and(|(n, _)| n == 0) {
            return Err(QuantError::Scheme {
                reason: "a block size of 0".to_owned(),
            });
        }
        if !matches!(
            self.dtype,
            DType::Float16 | DType::BFloat16 | DType::Float32
        ) {
            return Err(QuantError::Scheme {
                reason: format!(
                    "a {} weight: bitsandbytes' 4-bit weights are float16, bfloat16 or float32",
                    self.dtype
                ),
            });
        }
        Ok(())
    }
}

/// Elements a thread dequantizes at a time (whole blocks of most sizes).
const PIECE: usize = 1 << 14;

/// The dense weight of `w` (flattened) in `dst` (float32, bfloat16 or float16: exactly its
/// bytes), as `dequantize_4bit` computes it in the weight's dtype, then cast to `out`.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize_bnb4_into, Bnb4Scheme, Bnb4Weight};
/// // Two elements, codes 1 and 15 (one byte, high nibble first), one block with absmax 2.
/// let map: Vec<u8> = (0..16).flat_map(|c| (c as f32 / 8.0).to_le_bytes()).collect();
/// let w = Bnb4Weight { elements: 2, codes: &[0x1F], quant_map: &map,
///                      absmax: &2.0f32.to_le_bytes(), nested: None };
/// let scheme = Bnb4Scheme { blocksize: 64, nested: None, dtype: DType::Float32 };
/// let mut dense = [0u8; 8];
/// dequantize_bnb4_into(&w, &scheme, DType::Float32, &mut dense)?;
/// assert_eq!(dense, [0.25f32.to_le_bytes(), 3.75f32.to_le_bytes()].concat()[..]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn dequantize_bnb4_into(
    w: &Bnb4Weight,
    scheme: &Bnb4Scheme,
    out: DType,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    dequantize_bnb4_with(w, scheme, out, dst, true)
}

/// [`dequantize_bnb4_into`], by the one-pass form where it serves and `one_pass` allows it (the
/// tests compare the two).
pub(crate) fn dequantize_bnb4_with(
    w: &Bnb4Weight,
    scheme: &Bnb4Scheme,
    out: DType,
    dst: &mut [u8],
    one_pass: bool,
) -> Result<(), QuantError> {
    if !matches!(out, DType::Float32 | DType::BFloat16 | DType::Float16) {
        return Err(QuantError::OutputDType { dtype: out });
    }
    scheme.check()?;
    let n = w.elements;
    crate::integer::check_dims(n, 1)?;
    check_len("codes", n.div_ceil(2), w.codes.len())?;
    check_len("quant map", 64, w.quant_map.len())?;
    let blocks = n.div_ceil(scheme.blocksize);
    // Each block's absmax, read where a piece needs it (no buffer of the tensor's blocks).
    let nested = match (scheme.nested, w.nested) {
        (None, None) => {
            check_len("absmax", blocks * 4, w.absmax.len())?;
            None
        }
        (Some((nested_blocksize, offset)), Some((nested_absmax, nested_map))) => {
            check_len("absmax", blocks, w.absmax.len())?;
            check_len("nested quant map", 1024, nested_map.len())?;
            let nested_blocks = blocks.div_ceil(nested_blocksize);
            check_len("nested absmax", nested_blocks * 4, nested_absmax.len())?;
            Some((
                f32s(nested_map),
                f32s(nested_absmax),
                nested_blocksize,
                offset,
            ))
        }
        _ => {
            return Err(QuantError::Scheme {
                reason: "double quantization needs the nested absmax and quant map, and only it"
                    .to_owned(),
            })
        }
    };
    let absmax = |b: usize| -> f32 {
        match &nested {
            None => {
                let x = &w.absmax[4 * b..4 * b + 4];
                f32::from_le_bytes([x[0], x[1], x[2], x[3]])
            }
            Some((map, nested, nested_blocksize, offset)) => {
                let v = mul(map[usize::from(w.absmax[b])], nested[b / nested_blocksize]);
                add_as_on_x86(v, *offset)
            }
        }
    };
    let map = f32s(w.quant_map);
    let out_size = out.byte_size().unwrap_or(4);
    check_len("output", n * out_size, dst.len())?;
    let through = (out != scheme.dtype).then_some(scheme.dtype);
    let bs = scheme.blocksize;
    // Blocks of a multiple of 32: the one-pass lookup of each block's 16 outputs
    // (`integer::lookup`), the codes' nibbles swapped into the low-first order it reads.
    let one_pass = one_pass && bs.is_multiple_of(32) && n.is_multiple_of(32);
    // Pieces of whole blocks where blocks are small, of about PIECE elements (even) where they
    // are not (the one-pass form's pieces are larger: one cast of the tables each).
    let target = if one_pass {
        crate::integer::lookup::PIECE_ELEMENTS
    } else {
        PIECE
    };
    let piece = if bs <= target {
        (target / bs).max(1) * bs
    } else {
        target
    };
    let piece = piece + piece % 2;
    let map_finite = map.iter().all(|m| m.is_finite());
    dst.par_chunks_mut(piece * out_size)
        .enumerate()
        .try_for_each_init(
            || Pooled::take(&SCRATCH),
            |s: &mut Pooled<Scratch>, (p, dst)| -> Result<(), QuantError> {
                let Scratch {
                    values,
                    rounded,
                    tables,
                    swapped,
                } = &mut **s;
                let first = p * piece;
                let count = dst.len() / out_size;
                if one_pass {
                    values.clear();
                    for a in (first / bs..(first + count).div_ceil(bs)).map(absmax) {
                        if map_finite && a.is_finite() {
                            // (No NaN can arise: the plain products.)
                            values.extend(map.iter().map(|&m| m * a));
                        } else {
                            values.extend(map.iter().map(|&m| mul(m, a)));
                        }
                    }
                    tables.build(values, through, out, bs / 32)?;
                    let codes = &w.codes[first / 2..(first + count) / 2];
                    swapped.resize(codes.len(), 0);
                    for (s, &b) in swapped.iter_mut().zip(codes) {
                        *s = b.rotate_left(4);
                    }
                    crate::integer::lookup::dequantize(swapped, tables, out, dst);
                    return Ok(());
                }
                values.clear();
                values.extend((first..first + count).map(|i| {
                    let byte = w.codes[i / 2];
                    let code = if i % 2 == 0 { byte >> 4 } else { byte & 0xF };
                    mul(map[usize::from(code)], absmax(i / bs))
                }));
                let bytes: &[u8] = bytemuck::cast_slice(values);
                round_then_cast(bytes, through, out, dst, rounded)
            },
        )
}

/// The LLM.int8 weight `codes` (int8 `[rows, cols]`) with its per-row `scb` (float32) dense in
/// `dst`: `int8_vectorwise_dequant`'s float32 result, cast to `out`.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::dequantize_int8_rows_into;
/// let mut dense = [0u8; 8];
/// dequantize_int8_rows_into(&[127, 0x81], &[1, 2], &254.0f32.to_le_bytes(), DType::Float32, &mut dense)?;
/// assert_eq!(dense, [254.0f32.to_le_bytes(), (-254.0f32).to_le_bytes()].concat()[..]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn dequantize_int8_rows_into(
    codes: &[u8],
    shape: &[usize; 2],
    scb: &[u8],
    out: DType,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    if !matches!(out, DType::Float32 | DType::BFloat16 | DType::Float16) {
        return Err(QuantError::OutputDType { dtype: out });
    }
    let [rows, cols] = *shape;
    crate::integer::check_dims(rows, cols)?;
    let n = rows * cols;
    check_len("codes", n, codes.len())?;
    check_len("SCB", rows * 4, scb.len())?;
    let out_size = out.byte_size().unwrap_or(4);
    check_len("output", n * out_size, dst.len())?;
    if n == 0 {
        return Ok(());
    }
    let scb = f32s(scb);
    // bitsandbytes multiplies by the float32 nearest 1/127 (its constant 7.874015718698502e-3).
    let inverse = 7.874_015_718_698_502e-3_f64 as f32;
    let piece_rows = (PIECE / cols).max(1);
    dst.par_chunks_mut(piece_rows * cols * out_size)
        .enumerate()
        .try_for_each_init(
            || (Vec::new(), Vec::new()),
            |(values, rounded): &mut (Vec<f32>, Vec<u8>), (p, dst)| -> Result<(), QuantError> {
                let first = p * piece_rows;
                let count = dst.len() / out_size;
                values.clear();
                values.extend((0..count).map(|k| {
                    let i = first * cols + k;
                    let q = f32::from(codes[i] as i8);
                    mul(mul(q, scb[i / cols]), inverse)
                }));
                let bytes: &[u8] = bytemuck::cast_slice(values);
                round_then_cast(bytes, None, out, dst, rounded)
            },
        )
}

/// `a + b` as x86 computes it (a NaN operand quieted; inf − inf the x86 NaN).
fn add_as_on_x86(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        a + b
    } else {
        crate::arith::as_on_x86(a + b)
    }
}
