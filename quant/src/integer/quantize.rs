//! compressed-tensors' round-to-nearest integer quantization (its `W4A16`, `W4A16_ASYM`,
//! `W8A16`, `W2A16` presets and the INT8 per-channel weights), from min–max scales as
//! llm-compressor's observer gives them, bit for bit.
//!
//! Per group of columns of a row, in the weight's dtype `D` (every operation computed in
//! float32 and rounded to `D`, as torch computes on bfloat16 and float16 tensors):
//! `min = min(min(x), 0)`, `max = max(max(x), 0)`; symmetric: `scale = max(|min|, |max|) /
//! (range / 2)` with `range = 2^bits − 1`, zero point 0; asymmetric: `scale = (max − min) /
//! range`, `zero = clamp(q_min − min / scale, q_min, q_max)`; a zero scale becomes `D`'s
//! epsilon, and the zero point is rounded half to even into int8 (`calculate_qparams`). Each
//! element is `round(clamp(x / scale + zero, q_min, q_max))` (`_quantize`), a signed code of
//! `bits` bits, packed by `pack_to_int32`: `code + 2^(bits−1)`, each row one stream of bits in
//! int32 words (least significant first); asymmetric zero points the same way down each
//! group's column of rows.

use dtcast_dtype::DType;

use crate::arith::{f32s, round_in, torch_cast};
use crate::scheme::{Granularity, ScaleRule, Scheme};
use crate::QuantError;

/// A band of rows quantized: the packed codes (int32 words), the scales (in the weight's
/// dtype), the zero points (int8, one per scale; all 0 for a symmetric scheme).
#[derive(Clone, Debug, Default)]
pub struct IntQuantized {
    /// `[rows, ⌈cols·bits/32⌉]` int32 words, little-endian.
    pub packed: Vec<u8>,
    /// `[rows, groups]` scales in the weight's dtype.
    pub scales: Vec<u8>,
    /// `[rows, groups]` signed zero points.
    pub zeros: Vec<i8>,
}

/// The bits and symmetry of an integer scheme, or why it is not one.
pub(crate) fn integer_bits(scheme: &Scheme) -> Option<(u32, bool)> {
    let ScaleRule::MinMax { symmetric } = scheme.rule else {
        return None;
    };
    let bits = match scheme.element {
        DType::Int2 => 2,
        DType::Int4 => 4,
        DType::Int8 => 8,
        _ => return None,
    };
    Some((bits, symmetric))
}

/// The columns a scale covers in a row of `cols`, checked.
pub(crate) fn group_columns(scheme: &Scheme, cols: usize) -> Result<usize, QuantError> {
    match scheme.granularity {
        Granularity::Channel => Ok(cols.max(1)),
        Granularity::Group(k) if k > 0 && cols.is_multiple_of(k) => Ok(k),
        Granularity::Group(k) => Err(QuantError::Shape {
            reason: format!(
                "{cols} columns are not a whole number of groups of {k} (compressed-tensors' \
                 group strategy needs them to be; choose another --group-size)"
            ),
        }),
        Granularity::Tensor | Granularity::Block(..) => Err(QuantError::Scheme {
            reason: "integer weights are quantized per channel or per group".to_owned(),
        }),
    }
}

/// Rows of a `[rows, cols]` weight in `dtype` (`input`, whole rows) quantized by an integer
/// `scheme` as compressed-tensors does.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{quantize_int_rows, Scheme};
/// // One row of four float32 values, one symmetric 4-bit group: scale 7.5 / 7.5 = 1, codes
/// // round(x / scale) = 0, 1, -8 (-7.5, half to even) and 3, stored plus 8 in one int32 word.
/// let x: Vec<u8> = [0.0f32, 1.0, -7.5, 3.0].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let mut scheme = Scheme::named("ct_w4a16", DType::Float32)?;
/// scheme.granularity = dtcast_quant::Granularity::Channel;
/// let q = quantize_int_rows(&x, DType::Float32, 4, &scheme)?;
/// assert_eq!(q.scales, 1.0f32.to_le_bytes());
/// assert_eq!(q.packed, [0x08 | 0x09 << 4, 0x00 | 0x0B << 4, 0, 0]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn quantize_int_rows(
    input: &[u8],
    dtype: DType,
    cols: usize,
    scheme: &Scheme,
) -> Result<IntQuantized, QuantError> {
    let (bits, symmetric) = integer_bits(scheme).ok_or_else(|| QuantError::Scheme {
        reason: "not an integer scheme (int2, int4 or int8 elements with min-max scales)"
            .to_owned(),
    })?;
    scheme.check_input(dtype)?;
    let size = dtype.byte_size().unwrap_or(4);
    let row_bytes = cols * size;
    if row_bytes == 0 || !input.len().is_multiple_of(row_bytes) {
        if cols == 0 {
            return Ok(IntQuantized::default());
        }
        return Err(QuantError::Length {
            what: "input",
            needed: input.len().div_ceil(row_bytes) * row_bytes,
            given: input.len(),
        });
    }
    let k = group_columns(scheme, cols)?;
    let x = f32s(&torch_cast(input, dtype, DType::Float32));
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(QuantError::Shape {
            reason: format!(
                "element {i} of the rows is {}: min-max integer scales need finite weights",
                x[i]
            ),
        });
    }
    let r = |y: f32| round_in(y, dtype);
    let q_min = -((1i32 << (bits - 1)) as f32);
    let q_max = ((1i32 << (bits - 1)) - 1) as f32;
    let range = r(q_max - q_min);
    let half_range = r(range / 2.0);
    let eps = match dtype {
        DType::BFloat16 => f32::from_bits(0x3C00_0000), // 2^-7
        DType::Float16 => f32::from_bits(0x3A80_0000),  // 2^-10
        _ => f32::EPSILON,
    };
    let rows = x.len() / cols;
    let words = (cols * bits as usize).div_ceil(32);
    let mut out = IntQuantized {
        packed: vec![0; rows * words * 4],
        scales: Vec::with_capacity(rows * (cols / k) * size),
        zeros: Vec::with_capacity(rows * (cols / k)),
    };
    let mut scale_values = Vec::with_capacity(rows * (cols / k));
    let mut codes = vec![0i32; cols];
    for (row, xs) in x.chunks_exact(cols).enumerate() {
        for (g, group) in xs.chunks_exact(k).enumerate() {
            let min = group.iter().copied().fold(f32::INFINITY, f32::min).min(0.0);
            let max = group
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max)
                .max(0.0);
            let (mut scale, zero) = if symmetric {
                (r(min.abs().max(max.abs()) / half_range), 0.0)
            } else {
                let scale = r(r(max - min) / range);
                let zero = r(q_min - r(min / scale)).clamp(q_min, q_max);
                (scale, zero)
            };
            if scale == 0.0 {
                scale = eps;
            }
            // (An all-zero group's asymmetric zero is 0 / 0: torch's NaN, which converts to the
            // int8 0 on x86.)
            let zero = if zero.is_nan() {
                0
            } else {
                zero.round_ties_even() as i8
            };
            out.zeros.push(zero);
            scale_values.push(scale);
            let zero = f32::from(zero);
            for (c, &v) in group.iter().enumerate() {
                let scaled = r(r(v / scale) + zero).clamp(q_min, q_max);
                codes[g * k + c] = scaled.round_ties_even() as i32;
            }
        }
        pack_stream(
            codes.iter().map(|&q| (q + (1 << (bits - 1))) as u32),
            bits,
            &mut out.packed[row * words * 4..(row + 1) * words * 4],
        );
    }
    out.scales = torch_cast(bytemuck::cast_slice(&scale_values), DType::Float32, dtype);
    Ok(out)
}

/// `values` (each below `2^bits`) as one stream of bits in little-endian int32 words (`out`,
/// zeroed, exactly the words they need), least significant first.
fn pack_stream(values: impl Iterator<Item = u32>, bits: u32, out: &mut [u8]) {
    for (i, v) in values.enumerate() {
        let bit = i * bits as usize;
        let (w, shift) = (bit / 32, (bit % 32) as u32);
        let or_word = |out: &mut [u8], w: usize, v: u32| {
            let at = &mut out[4 * w..4 * w + 4];
            let word = u32::from_le_bytes([at[0], at[1], at[2], at[3]]) | v;
            at.copy_from_slice(&word.to_le_bytes());
        };
        or_word(out, w, v << shift);
        if shift + bits > 32 {
            or_word(out, w + 1, v >> (32 - shift));
        }
    }
}

/// Signed zero points `[rows, groups]` packed as compressed-tensors stores them
/// (`pack_to_int32(zero_point, bits, packed_dim=0)`): each group's column a stream of bits
/// down the rows, `[⌈rows·bits/32⌉, groups]` int32 words.
pub fn pack_zero_points(zeros: &[i8], rows: usize, groups: usize, bits: u32) -> Vec<u8> {
    let words = (rows * bits as usize).div_ceil(32);
    let mut out = vec![0u8; words * groups * 4];
    let mut column = vec![0u8; words * 4];
    for g in 0..groups {
        column.fill(0);
        let values =
            (0..rows).map(|r| (i32::from(zeros[r * groups + g]) + (1 << (bits - 1))) as u32);
        pack_stream(values, bits, &mut column);
        for w in 0..words {
            let at = (w * groups + g) * 4;
            out[at..at + 4].copy_from_slice(&column[4 * w..4 * w + 4]);
        }
    }
    out
}
