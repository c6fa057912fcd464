//! Scaled elements back to dense floats, as each reference computes it.

use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{bytes, f32s, in_dtype, mul, pow2, torch_cast};
use crate::scheme::{Convention, ScaleRule, Scheme};
use crate::QuantError;

/// A quantized tensor as stored: its elements, their logical shape, its scales.
#[derive(Clone, Copy, Debug)]
pub struct Quantized<'a> {
    /// The elements in storage (float4: packed, two per byte, the first in the low nibble).
    pub elements: &'a [u8],
    /// The logical shape in elements (`[rows, cols]`; more dimensions count as rows). For
    /// gpt-oss: `[experts, rows, cols]`, the shape of its `*_blocks` with the last two dimensions
    /// flattened into 32-element columns.
    pub shape: &'a [usize],
    /// The scales in storage, row-major in the scheme's layout (E8M0 scales: one byte each).
    pub scales: &'a [u8],
    /// The tensor's global scale (NVFP4): compressed-tensors' `weight_global_scale` (a divisor)
    /// or torchao's `per_tensor_scale` (a multiplier).
    pub global_scale: Option<f32>,
}

/// The dense tensor of `q` in `out` (float32, bfloat16 or float16), bit for bit as the scheme's
/// reference dequantizes it. gpt-oss output is transposed to `[experts, cols, rows]`, the layout of
/// transformers' expert parameters.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize, Quantized, Scheme};
/// // DeepSeek-V3 block FP8: element 0x38 (1.0) and 0x40 (2.0), one block scale 0.5.
/// let q = Quantized {
///     elements: &[0x38, 0x40],
///     shape: &[1, 2],
///     scales: &0.5f32.to_le_bytes(),
///     global_scale: None,
/// };
/// let out = dequantize(&q, &Scheme::named("deepseek_v3_fp8_block", DType::BFloat16)?, DType::BFloat16)?;
/// assert_eq!(out, [0x00, 0x3F, 0x80, 0x3F]); // bfloat16 0.5 and 1.0
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn dequantize(q: &Quantized, scheme: &Scheme, out: DType) -> Result<Vec<u8>, QuantError> {
    if !matches!(out, DType::Float32 | DType::BFloat16 | DType::Float16) {
        return Err(QuantError::OutputDType { dtype: out });
    }
    let (rows, cols) = rows_cols(q.shape)?;
    let n = rows * cols;
    let needed = scheme
        .element
        .storage_bytes(n)
        .map_err(|_| QuantError::Shape {
            reason: format!("{n} {} elements do not end on a byte", scheme.element),
        })?;
    check_len("elements", needed, q.elements.len())?;
    scheme.check()?;
    let count = scheme.scale_count(rows, cols)?;
    let scale_bytes = scheme.scale.byte_size().unwrap_or(1);
    check_len("scales", count * scale_bytes, q.scales.len())?;
    if q.global_scale.is_some() != scheme.global_scale {
        return Err(QuantError::GlobalScale {
            needed: scheme.global_scale,
        });
    }
    let global = q.global_scale.unwrap_or(1.0);
    // What each element code reads as, in float32 (the value the product takes).
    let codes = 1usize << scheme.element.bits();
    let all_codes: Vec<u8> = (0..codes).map(|c| c as u8).collect();
    let mut table = if scheme.element.is_packed() {
        let packed: Vec<u8> = all_codes.chunks(2).map(|p| p[0] | p[1] << 4).collect();
        f32s(&torch_cast(&packed, scheme.element, DType::Float32))
    } else {
        f32s(&torch_cast(&all_codes, scheme.element, DType::Float32))
    };
    if scheme.convention == Convention::TorchAo {
        // torchao's `.to()` of float8 runs torch's vectorised conversion: a NaN element becomes
        // the default NaN, without its sign.
        for v in table.iter_mut().filter(|v| v.is_nan()) {
            *v = f32::from_bits(0x7FC0_0000);
        }
    }
    let factors: Vec<f32> = match (scheme.rule, scheme.convention) {
        (_, Convention::GptOss) => {
            let values: Vec<f32> = (0..n).map(|i| table[code(q.elements, scheme, i)]).collect();
            return Ok(gpt_oss(&values, q, scheme, rows, cols, out));
        }
        // torchao: `2^(E-127)` in float32 (255: NaN), then in the output dtype, as the elements.
        (ScaleRule::PowerOfTwo(_), Convention::TorchAo) => {
            let factors: Vec<f32> = q
                .scales
                .iter()
                .map(|&e| {
                    if e == 255 {
                        f32::from_bits(0x7FC0_0000)
                    } else {
                        pow2(i32::from(e) - 127)
                    }
                })
                .collect();
            table = in_dtype(&table, out);
            in_dtype(&factors, out)
        }
        // compressed-tensors: bfloat16 powers of two (255: 2^128 = inf).
        (ScaleRule::PowerOfTwo(_), _) => {
            let factors: Vec<f32> = q.scales.iter().map(|&e| pow2(i32::from(e) - 127)).collect();
            in_dtype(&factors, DType::BFloat16)
        }
        // compressed-tensors divides by its global scale, torchao multiplies by its per-tensor
        // scale.
        (ScaleRule::AbsMax, convention) => {
            f32s(&torch_cast(q.scales, scheme.scale, DType::Float32))
                .into_iter()
                .map(|s| match (scheme.global_scale, convention) {
                    (false, _) => s,
                    (true, Convention::TorchAo) => mul(s, global),
                    (true, _) => s / global,
                })
                .collect()
        }
    };
    // The product in float32, rounded once to the output dtype, row by row on the thread pool.
    let dense = if scheme.element.is_packed() {
        let value = |i: usize| table[usize::from(q.elements[i / 2] >> (4 * (i % 2)) & 0xF)];
        products(out, rows, cols, scheme, &factors, value)
    } else {
        let value = |i: usize| table[usize::from(q.elements[i])];
        products(out, rows, cols, scheme, &factors, value)
    };
    Ok(match out {
        // float16: the products in float32 first, then torch's rounding.
        DType::Float16 => torch_cast(&dense, DType::Float32, DType::Float16),
        _ => dense,
    })
}

/// `value(i) * factor` for every element, in bfloat16 (torch's rounding) or else float32 bytes.
fn products(
    out: DType,
    rows: usize,
    cols: usize,
    scheme: &Scheme,
    factors: &[f32],
    value: impl Fn(usize) -> f32 + Sync,
) -> Vec<u8> {
    match out {
        DType::BFloat16 => fill(rows, cols, scheme, factors, value, |x| {
            f32_to_bf16(x).to_le_bytes()
        }),
        _ => fill(rows, cols, scheme, factors, value, |x: f32| x.to_le_bytes()),
    }
}

/// The rows, each on the thread pool: `encode(value(i) * factor)` into `W` bytes per element.
fn fill<const W: usize>(
    rows: usize,
    cols: usize,
    scheme: &Scheme,
    factors: &[f32],
    value: impl Fn(usize) -> f32 + Sync,
    encode: impl Fn(f32) -> [u8; W] + Sync,
) -> Vec<u8> {
    let mut dense = vec![0u8; rows * cols * W];
    if cols == 0 {
        return dense;
    }
    dense
        .par_chunks_mut(cols * W)
        .enumerate()
        .for_each(|(r, row)| {
            for (start, end, k) in scheme.runs(r, cols) {
                let f = factors[k];
                for (c, out) in (start..end).zip(row[start * W..end * W].chunks_exact_mut(W)) {
                    out.copy_from_slice(&encode(mul(value(r * cols + c), f)));
                }
            }
        });
    dense
}

/// The code of element `i` (float4: packed two per byte, the first in the low nibble).
#[inline(always)]
fn code(elements: &[u8], scheme: &Scheme, i: usize) -> usize {
    if scheme.element.is_packed() {
        usize::from(elements[i / 2] >> (4 * (i % 2)) & 0xF)
    } else {
        usize::from(elements[i])
    }
}

/// torch's float32 → bfloat16 (its vectorised copy): round to nearest even; a NaN is `0xFFFF`.
#[inline(always)]
fn f32_to_bf16(x: f32) -> u16 {
    if x.is_nan() {
        0xFFFF
    } else {
        let b = x.to_bits();
        ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
    }
}

/// transformers' `convert_moe_packed_tensors`: `ldexp(value, E - 127)`, exact and rounded once
/// to `out` (zero stays zero, 255 is 2^128), transposed from `[experts, rows, cols]` to
/// `[experts, cols, rows]`.
fn gpt_oss(
    values: &[f32],
    q: &Quantized,
    scheme: &Scheme,
    rows: usize,
    cols: usize,
    out: DType,
) -> Vec<u8> {
    let experts = if q.shape.len() >= 3 { q.shape[0] } else { 1 };
    let per_expert = rows / experts.max(1);
    let mut dense = vec![0f32; values.len()];
    for (i, &v) in values.iter().enumerate() {
        let (r, c) = (i / cols, i % cols);
        let e = q.scales[scheme.scale_index(r, c, cols)];
        // An f64 holds v * 2^(E - 127) exactly; f32 rounds it once (or overflows to inf).
        let exact = f64::from(v) * f64::from_bits(((i64::from(e) - 127 + 1023) as u64) << 52);
        let (expert, row) = (r / per_expert, r % per_expert);
        dense[expert * per_expert * cols + c * per_expert + row] = exact as f32;
    }
    torch_cast(&bytes(&dense), DType::Float32, out)
}

pub(crate) fn rows_cols(shape: &[usize]) -> Result<(usize, usize), QuantError> {
    let Some((&cols, lead)) = shape.split_last() else {
        return Err(QuantError::Shape {
            reason: "a quantized tensor needs at least one dimension".to_owned(),
        });
    };
    let rows = lead
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|r| r.checked_mul(cols).is_some())
        .ok_or_else(|| QuantError::Shape {
            reason: format!("the shape {shape:?} has more elements than memory can hold"),
        })?;
    Ok((rows, cols))
}

pub(crate) fn check_len(what: &'static str, needed: usize, given: usize) -> Result<(), QuantError> {
    if needed == given {
        Ok(())
    } else {
        Err(QuantError::Length {
            what,
            needed,
            given,
        })
    }
}
