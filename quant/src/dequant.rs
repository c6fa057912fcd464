//! Scaled elements back to dense floats, as each reference computes it.
//!
//! [`dequantize_into`] runs pieces of rows through `dtcast_cast`'s SIMD casts — elements to
//! float32, a product loop LLVM vectorises with each scale's factor, float32 to the output with
//! streaming stores (`cast_streaming`); the factors of one-byte scales are looked up per byte.
//! That is the definition; on AVX-512 or AVX2, into bfloat16, float16 and float32, one pass
//! replaces it, in pieces of 2^18 elements (a store fence each: a fence waits for the streamed
//! lines to reach memory): float4 groups by lookups of each group's 16 outputs (`lookup4.rs`),
//! float8 decoded, scaled and rounded in registers (`e4m3.rs`), both writing whole cache lines
//! wherever the buffer starts (`lines.rs`). With neither set (the portable one) the float4 loop
//! over the bytes serves, and float8 into bfloat16 or float16 looks codes up in tables of each
//! run's factor (`e4m3::Tables`).
//!
//! [`DequantPlan`] (each code's value, each scale's factor) is what `dequantize_into` itself works
//! from, its float4 lookups included (`plan_values`; the float8 forms decode as the cast does,
//! which a debug assertion holds the plan to); `from_parts` needs only one-byte scales' length, so
//! a GPU's stay there. The NaN rules are x86's on every CPU (`arith::as_on_x86`); ModelOpt's are
//! torch's per output dtype (`one_nan`).

use dtcast_dtype::DType;
use rayon::prelude::*;

use dtcast_cast::{cast, cast_streaming, CastMode};

use crate::arith::{
    bytes, div, f16_value, f32s, in_dtype, internal, mul, pow2, scaled_as_on_x86, torch_cast,
};
use crate::scheme::{Convention, Granularity, ScaleRule, Scheme};
use crate::simd::with_best_isa;
use crate::QuantError;
use crate::{e4m3, lookup4};

/// A quantized tensor as stored: its elements, their logical shape, its scales.
#[derive(Clone, Copy, Debug)]
pub struct Quantized<'a> {
    /// The elements in storage (float4: packed, two per byte, the first in the low nibble;
    /// float6: four in three bytes, least significant bits first).
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

/// How a backend dequantizes one tensor: what each element code reads as, each scale's factor,
/// and where the scales are.
#[derive(Clone, Debug, PartialEq)]
pub struct DequantPlan {
    /// Rows of the tensor (its leading dimensions together).
    pub rows: usize,
    /// Columns (its last dimension).
    pub cols: usize,
    /// The float32 value each element code reads as (16 for float4, 64 for float6, 256 for
    /// float8), NaN bits included.
    pub values: Vec<f32>,
    /// Each scale's factor: indexed by the scale's stored byte where
    /// [`by_scale_byte`](DequantPlan::by_scale_byte) (256 entries), else by the scale's index.
    /// Empty for gpt-oss, whose scale bytes are exponents.
    pub factors: Vec<f32>,
    /// Whether scales are one byte each and [`factors`](DequantPlan::factors) is looked up by it.
    pub by_scale_byte: bool,
    /// gpt-oss: the number of experts; the output is `[experts, cols, rows / experts]` and each
    /// element is `ldexp(value, byte - 127)` (exact in float64, then rounded to float32).
    pub gpt_oss_experts: Option<usize>,
}

/// A tensor's scales as [`DequantPlan::from_parts`] reads them.
#[derive(Clone, Copy, Debug)]
pub enum Scales<'a> {
    /// The stored bytes.
    Bytes(&'a [u8]),
    /// Only their length in bytes: all a plan needs of one-byte scales (E8M0, float8), whose
    /// factors are a table of the 256 bytes — so that scales on a GPU need not cross the bus.
    Length(usize),
}

impl Scales<'_> {
    /// The scales' length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Scales::Bytes(bytes) => bytes.len(),
            Scales::Length(len) => *len,
        }
    }

    /// Whether there are no scale bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
    // Every check before the output is allocated: a shape that the elements do not back (say
    // [2^40, 1] over four bytes) is an error, not an allocation of terabytes.
    let checked = plan(q.elements.len(), q, scheme, out)?;
    let n = checked.rows * checked.cols;
    let bytes = (n.checked_mul(out.byte_size().unwrap_or(4))).ok_or_else(|| QuantError::Shape {
        reason: format!(
            "the shape {:?} has more elements than memory can hold",
            q.shape
        ),
    })?;
    let mut dense = zeroed(bytes, "output")?;
    dequantize_into(q, scheme, out, &mut dense)?;
    Ok(dense)
}

/// [`dequantize`] into a buffer of the caller's (`dst`: exactly the dense tensor's bytes), so that
/// a conversion can reuse its buffers; on error `dst` holds nothing meaningful.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize_into, Quantized, Scheme};
/// let q = Quantized { elements: &[0x38, 0x40], shape: &[1, 2], scales: &0.5f32.to_le_bytes(), global_scale: None };
/// let mut dense = [0u8; 8];
/// dequantize_into(&q, &Scheme::named("deepseek_v3_fp8_block", DType::Float32)?, DType::Float32, &mut dense)?;
/// assert_eq!(dense, [0.5f32.to_le_bytes(), 1.0f32.to_le_bytes()].concat()[..]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn dequantize_into(
    q: &Quantized,
    scheme: &Scheme,
    out: DType,
    dst: &mut [u8],
) -> Result<(), QuantError> {
    let plan = plan(q.elements.len(), q, scheme, out)?;
    let (rows, cols) = (plan.rows, plan.cols);
    let n = rows * cols;
    if plan.gpt_oss_experts.is_some() {
        let values: Vec<f32> = (0..n)
            .map(|i| plan.values[code(q.elements, scheme, i)])
            .collect();
        let dense = gpt_oss(&values, q, scheme, rows, cols, out);
        check_len("output", dense.len(), dst.len())?;
        dst.copy_from_slice(&dense);
        return Ok(());
    }
    let table = &plan.values;
    let factors = Factors {
        values: &plan.factors,
        scales: plan.by_scale_byte.then_some(q.scales),
    };
    // A NaN element reads as one value in torchao (the default NaN, then in the output dtype);
    // elsewhere as its code's own NaN, which the cast below gives.
    let nan = one_nan(scheme, out)
        .then(|| table.iter().copied().find(|v| v.is_nan()))
        .flatten();
    // The product in float32, rounded once to the output dtype: pieces of whole rows on the
    // thread pool, each through a small float32 buffer (the element cast, the products, the
    // rounding: SIMD casts and a loop LLVM vectorises).
    let out_size = out.byte_size().unwrap_or(4);
    check_len("output", n * out_size, dst.len())?;
    if n == 0 {
        return Ok(());
    }
    let piece_rows = (PIECE_ELEMENTS / cols).max(1);
    let one_pass_rows = (ONE_PASS_PIECE_ELEMENTS / cols).max(1);
    if let Granularity::Group(k) = scheme.granularity {
        if lookup4::supports(scheme.element, k, out) && nan.is_none() && cols % k == 0 {
            // float4 in groups: each group's 16 outputs once (one-byte scales: once per byte),
            // every element looked up (one pass).
            let values: [f32; 16] = plan_values(&plan.values)?;
            let piece = |p: usize, dst: &[u8]| {
                let first = p * one_pass_rows * cols;
                let count = dst.len() / out_size;
                (
                    first / k..(first + count) / k,
                    first / 2..(first + count) / 2,
                )
            };
            let pieces = dst
                .par_chunks_mut(one_pass_rows * cols * out_size)
                .enumerate();
            if plan.by_scale_byte {
                let tables = lookup4::ByteTables::new(&values, &plan.factors, out);
                pieces.for_each(|(p, dst)| {
                    let (groups, elements) = piece(p, dst);
                    let by_byte = lookup4::ByByte {
                        tables: &tables,
                        scales: &q.scales[groups],
                    };
                    lookup4::dequantize(&q.elements[elements], k, &by_byte, out, dst);
                });
            } else {
                pieces.for_each_init(Vec::new, |piece_factors: &mut Vec<f32>, (p, dst)| {
                    let (groups, elements) = piece(p, dst);
                    piece_factors.clear();
                    piece_factors.extend(groups.map(|g| factors.at(g)));
                    let by_factor = lookup4::ByFactor {
                        values,
                        factors: piece_factors,
                        out,
                    };
                    lookup4::dequantize(&q.elements[elements], k, &by_factor, out, dst);
                });
            }
            return Ok(());
        }
    }
    if e4m3::supports(scheme.element, out) {
        // float8 to bfloat16, float16 or float32: decode, product and rounding in registers (one
        // pass).
        // (The SIMD forms decode the codes themselves, as the cast does: the table is the cast's,
        // with torchao's NaN.)
        let mut values: [f32; 256] = code_values(scheme.element)?;
        if let Some(nan) = nan {
            // torchao's one NaN (float16 and float32 keep a NaN's sign and payload; bfloat16 has
            // one NaN).
            for v in values.iter_mut().filter(|v| v.is_nan()) {
                *v = nan;
            }
        }
        debug_assert!(
            (values.iter().zip(&plan.values)).all(|(a, b)| a.to_bits() == b.to_bits()),
            "the plan reads float8 codes as the cast does"
        );
        let codes = e4m3::Codes {
            values: &values,
            out,
        };
        // Where every row is whole runs of one length, a piece of rows is one call with a factor
        // per run (in row-major order, as the elements are).
        let run = match scheme.granularity {
            Granularity::Tensor | Granularity::Channel => cols,
            Granularity::Group(k) | Granularity::Block(_, k) => k,
        };
        let even = run > 0 && cols % run == 0;
        dst.par_chunks_mut(one_pass_rows * cols * out_size)
            .enumerate()
            .for_each_init(Vec::new, |piece_factors: &mut Vec<f32>, (p, dst)| {
                let first = p * one_pass_rows;
                if even {
                    let rows = dst.len() / out_size / cols;
                    piece_factors.clear();
                    for r in first..first + rows {
                        piece_factors.extend(scheme.runs(r, cols).map(|(_, _, k)| factors.at(k)));
                    }
                    let src = &q.elements[first * cols..(first + rows) * cols];
                    e4m3::groups(src, codes, run, piece_factors, dst);
                } else {
                    for (j, dst) in dst.chunks_exact_mut(cols * out_size).enumerate() {
                        let r = first + j;
                        let src = &q.elements[r * cols..(r + 1) * cols];
                        for (start, end, k) in scheme.runs(r, cols) {
                            let dst = &mut dst[start * out_size..end * out_size];
                            e4m3::run(&src[start..end], codes, factors.at(k), dst);
                        }
                    }
                }
                lookup4::store_fence();
            });
        return Ok(());
    }
    let element_bytes = |elements: usize| scheme.element.storage_bytes(elements).unwrap_or(0);
    dst.par_chunks_mut(piece_rows * cols * out_size)
        .enumerate()
        .try_for_each_init(
            Vec::new,
            |values: &mut Vec<f32>, (p, dst)| -> Result<(), QuantError> {
                let first = p * piece_rows;
                let count = dst.len() / out_size;
                let src =
                    &q.elements[element_bytes(first * cols)..element_bytes(first * cols + count)];
                values.resize(count, 0.0);
                let values = &mut values[..count];
                let as_bytes = bytemuck::cast_slice_mut(values);
                cast(
                    src,
                    scheme.element,
                    as_bytes,
                    DType::Float32,
                    CastMode::Torch,
                )
                .map_err(internal)?;
                // The products, vectorised for the chosen instruction set.
                with_best_isa(
                    #[inline(always)]
                    || {
                        if let Some(nan) = nan {
                            for v in values.iter_mut() {
                                *v = if v.is_nan() { nan } else { *v };
                            }
                        }
                        for (j, row) in values.chunks_exact_mut(cols).enumerate() {
                            scale_row(row, first + j, scheme, &factors);
                        }
                    },
                );
                // float16: the products in float32 first, then torch's rounding. The dense tensor
                // is written piece by piece and not read back here: streaming stores.
                let values: &[u8] = bytemuck::cast_slice(values);
                cast_streaming(values, DType::Float32, dst, out, CastMode::Torch)
                    .map_err(internal)?;
                Ok(())
            },
        )
}

/// The checks and tables of a dequantization ([`DequantPlan::new`](crate::DequantPlan::new)).
pub(crate) fn plan(
    element_bytes: usize,
    q: &Quantized,
    scheme: &Scheme,
    out: DType,
) -> Result<DequantPlan, QuantError> {
    let scales = Scales::Bytes(q.scales);
    DequantPlan::from_parts(element_bytes, q.shape, scales, q.global_scale, scheme, out)
}

impl DequantPlan {
    /// The plan for `q` under `scheme` into `out`, after every check [`dequantize`](fn@crate::dequantize)
    /// makes (shape, lengths, scheme, global scale, output dtype).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::{DequantPlan, Quantized, Scheme};
    /// let q = Quantized { elements: &[0x72; 16], shape: &[1, 32], scales: &[126], global_scale: None };
    /// let plan = DequantPlan::new(&q, &Scheme::named("ao_mxfp4_floor", DType::Float32)?, DType::Float32)?;
    /// assert_eq!((plan.values[2], plan.values[7]), (1.0, 6.0)); // float4 codes 0x2 and 0x7
    /// assert_eq!(plan.factors[126], 0.5); // E8M0 byte 126 is 2^-1
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn new(q: &Quantized, scheme: &Scheme, out: DType) -> Result<DequantPlan, QuantError> {
        plan(q.elements.len(), q, scheme, out)
    }

    /// [`DequantPlan::new`] for a tensor whose elements are elsewhere (on a GPU): only their
    /// length in bytes is checked, and one-byte scales' ([`Scales::Length`]).
    ///
    /// ```
    /// use dtcast_dtype::DType;
    /// use dtcast_quant::{DequantPlan, Scales, Scheme};
    /// let scheme = Scheme::named("ct_nvfp4", DType::BFloat16)?;
    /// // A [2, 32] NVFP4 tensor: 32 bytes of codes, four float8 scales, a global scale.
    /// let plan = DequantPlan::from_parts(32, &[2, 32], Scales::Length(4), Some(2.0), &scheme, DType::BFloat16)?;
    /// assert_eq!(plan.factors[0x38], 0.5); // float8_e4m3fn 1.0 divided by the global scale
    /// // Float32 scales are read: their length alone is not enough.
    /// let channel = Scheme::named("ct_fp8_channel", DType::BFloat16)?;
    /// assert!(DequantPlan::from_parts(2, &[2, 1], Scales::Length(8), None, &channel, DType::BFloat16).is_err());
    /// # Ok::<(), dtcast_quant::QuantError>(())
    /// ```
    pub fn from_parts(
        element_bytes: usize,
        shape: &[usize],
        scales: Scales,
        global_scale: Option<f32>,
        scheme: &Scheme,
        out: DType,
    ) -> Result<DequantPlan, QuantError> {
        if !matches!(out, DType::Float32 | DType::BFloat16 | DType::Float16) {
            return Err(QuantError::OutputDType { dtype: out });
        }
        let (rows, cols) = rows_cols(shape)?;
        let n = rows * cols;
        let needed = scheme
            .element
            .storage_bytes(n)
            .map_err(|_| QuantError::Shape {
                reason: format!("{n} {} elements do not end on a byte", scheme.element),
            })?;
        check_len("elements", needed, element_bytes)?;
        scheme.check()?;
        check_len("scales", scheme.scale_bytes(rows, cols)?, scales.len())?;
        if global_scale.is_some() != scheme.global_scale {
            return Err(QuantError::GlobalScale {
                needed: scheme.global_scale,
            });
        }
        let global = global_scale.unwrap_or(1.0);
        // What each element code reads as, in float32 (the value the product takes).
        let codes = 1usize << scheme.element.bits();
        let all_codes: Vec<u8> = (0..codes).map(|c| c as u8).collect();
        let mut table = if scheme.element.is_packed() {
            // (Every code once: 16 or 64 of them, whole bytes.)
            let storage = |e: dtcast_dtype::packing::StorageError| QuantError::Scheme {
                reason: format!("internal error packing {} codes: {e}", scheme.element),
            };
            let mut packed = vec![0u8; scheme.element.storage_bytes(codes).map_err(storage)?];
            dtcast_dtype::packing::pack(scheme.element, &all_codes, &mut packed)
                .map_err(storage)?;
            f32s(&torch_cast(&packed, scheme.element, DType::Float32))
        } else {
            f32s(&torch_cast(&all_codes, scheme.element, DType::Float32))
        };
        if one_nan(scheme, out) {
            for v in table.iter_mut().filter(|v| v.is_nan()) {
                *v = f32::from_bits(0x7FC0_0000);
            }
        }
        if scheme.convention == Convention::ModelOpt && scheme.element == DType::Float4E2M1Fn {
            // ModelOpt's float4 table (`e2m1_values`) reads code 0x8 as 0, not -0.
            for v in table.iter_mut().filter(|v| **v == 0.0) {
                *v = 0.0;
            }
        }
        // One-byte scales (E8M0, float8): the factor of each of the 256 bytes, looked up per group;
        // wider scales (a few per tensor, row or block): each scale's factor.
        let every_byte: Vec<u8> = (0..=255).collect();
        let by_byte = scheme.scale.byte_size() == Some(1);
        let scale_src: &[u8] = match (by_byte, scales) {
            (true, _) => &every_byte,
            (false, Scales::Bytes(bytes)) => bytes,
            (false, Scales::Length(_)) => {
                return Err(QuantError::Scheme {
                    reason: format!(
                        "{} scales' factors are computed from their bytes: give the scales' bytes, not only their length",
                        scheme.scale
                    ),
                })
            }
        };
        let factors: Vec<f32> = match (scheme.rule, scheme.convention) {
            (ScaleRule::MinMax { .. }, _) => return Err(crate::scheme::not_scaled()),
            // gpt-oss: the scale bytes are exponents (`ldexp`), no factors.
            (_, Convention::GptOss) => Vec::new(),
            // torchao: `2^(E-127)` in float32 (255: NaN), then in the output dtype, as the elements.
            (ScaleRule::PowerOfTwo(_), Convention::TorchAo) => {
                let factors: Vec<f32> = scale_src
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
                let factors: Vec<f32> = scale_src
                    .iter()
                    .map(|&e| pow2(i32::from(e) - 127))
                    .collect();
                in_dtype(&factors, DType::BFloat16)
            }
            // ModelOpt's FP8: element and scale each in the output dtype, the product in it (a
            // float8 value is exact in every output dtype, a NaN keeps its payload there: the
            // elements need no rounding).
            (ScaleRule::AbsMax, Convention::ModelOpt) if !scheme.global_scale => {
                let factors = f32s(&torch_cast(scale_src, scheme.scale, DType::Float32));
                // The scale is a 0-d tensor: its `.to()` takes c10's scalar rules, under which a
                // NaN becomes float16's 0x7E00 with its sign, or bfloat16's 0x7FC0.
                (in_dtype(&factors, out).into_iter().zip(&factors))
                    .map(|(rounded, &s)| match (s.is_nan(), out) {
                        (true, DType::Float16) => {
                            f32::from_bits(s.to_bits() & 0x8000_0000 | 0x7FC0_0000)
                        }
                        (true, DType::BFloat16) => f32::from_bits(0x7FC0_0000),
                        _ => rounded,
                    })
                    .collect()
            }
            // compressed-tensors divides by its global scale, torchao and ModelOpt multiply by
            // their per-tensor scale. (float16 scales, compressed-tensors' FP8 of float16
            // weights, are read as its float16 product reads them, `vcvtph2ps`: NaN bits kept,
            // where `.to(float32)` would write 0x7FFFFFFF.)
            (ScaleRule::AbsMax, convention) => {
                let scales = if scheme.scale == DType::Float16 {
                    (scale_src.as_chunks::<2>().0.iter())
                        .map(|&b| f16_value(u16::from_le_bytes(b)))
                        .collect()
                } else {
                    f32s(&torch_cast(scale_src, scheme.scale, DType::Float32))
                };
                scales
                    .into_iter()
                    .map(|s| match (scheme.global_scale, convention) {
                        (false, _) => s,
                        (true, Convention::TorchAo | Convention::ModelOpt) => mul(s, global),
                        (true, _) => div(s, global),
                    })
                    .collect()
            }
        };
        let gpt_oss_experts = (scheme.convention == Convention::GptOss).then(|| {
            if shape.len() >= 3 {
                shape[0]
            } else {
                1
            }
        });
        Ok(DequantPlan {
            rows,
            cols,
            values: table,
            factors,
            by_scale_byte: by_byte,
            gpt_oss_experts,
        })
    }

    /// The dense tensor's shape: `[rows, cols]`'s leading dimensions as given, or gpt-oss's
    /// `[experts, cols, rows / experts]`.
    pub fn output_shape(&self, shape: &[usize]) -> Vec<usize> {
        match self.gpt_oss_experts {
            Some(experts) => vec![experts, self.cols, self.rows / experts.max(1)],
            None => shape.to_vec(),
        }
    }
}

/// Whether every NaN element reads as the default NaN: torchao's `.to()` of float8 runs torch's
/// vectorised conversion, which drops a NaN's sign and payload; ModelOpt's FP8 multiplies in
/// the output dtype, where bfloat16 arithmetic has one NaN and float16 and float32 keep the
/// element's (its float4 has no NaN).
fn one_nan(scheme: &Scheme, out: DType) -> bool {
    match scheme.convention {
        Convention::TorchAo => true,
        Convention::ModelOpt => out == DType::BFloat16,
        Convention::CompressedTensors | Convention::DeepSeek | Convention::GptOss => false,
    }
}

/// The float32 value of each of the `N` codes of `element` (16 for float4, 256 for float8), as
/// the general path's element cast gives them.
fn code_values<const N: usize>(element: DType) -> Result<[f32; N], QuantError> {
    let codes: Vec<u8> = (0..N).map(|c| c as u8).collect();
    let stored = if element.is_packed() {
        codes.chunks(2).map(|p| p[0] | p[1] << 4).collect()
    } else {
        codes
    };
    let mut values = [0f32; N];
    cast(
        &stored,
        element,
        bytemuck::cast_slice_mut(&mut values),
        DType::Float32,
        CastMode::Torch,
    )
    .map_err(internal)?;
    Ok(values)
}

/// The plan's value of each of the `N` codes (16 for float4): what the float4 lookups read an
/// element code as (ModelOpt's table differs from the cast's).
fn plan_values<const N: usize>(values: &[f32]) -> Result<[f32; N], QuantError> {
    values.try_into().map_err(|_| QuantError::Scheme {
        reason: format!(
            "internal error: the plan reads {} element codes, not {N}",
            values.len()
        ),
    })
}

/// Each scale's factor: looked up by the scale's byte (`scales`: one-byte scales), or by its
/// index.
struct Factors<'a> {
    values: &'a [f32],
    scales: Option<&'a [u8]>,
}

impl Factors<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f32 {
        match self.scales {
            Some(bytes) => self.values[usize::from(bytes[k])],
            None => self.values[k],
        }
    }
}

/// Row `r`'s values times their scales' factors (`mul`'s rule: a NaN factor gives its own NaN,
/// quieted, to the whole run). Groups walk the row's scales directly (no run list per row).
#[inline(always)]
fn scale_row(row: &mut [f32], r: usize, scheme: &Scheme, factors: &Factors) {
    if let Granularity::Group(k) = scheme.granularity {
        let per_row = row.len() / k;
        let first = r * per_row;
        // The group sizes the formats use, known to the compiler (each group's loop unrolled).
        match k {
            16 => scale_groups::<16>(row, first, factors),
            32 => scale_groups::<32>(row, first, factors),
            _ => {
                for (g, run) in row.chunks_exact_mut(k).enumerate() {
                    scale_run(run, factors.at(first + g));
                }
            }
        }
    } else {
        for (start, end, k) in scheme.runs(r, row.len()) {
            scale_run(&mut row[start..end], factors.at(k));
        }
    }
}

#[inline(always)]
fn scale_groups<const K: usize>(row: &mut [f32], first: usize, factors: &Factors) {
    let (groups, _) = row.as_chunks_mut::<K>();
    for (g, group) in groups.iter_mut().enumerate() {
        scale_run(group, factors.at(first + g));
    }
}

#[inline(always)]
fn scale_run(run: &mut [f32], f: f32) {
    if f.is_nan() {
        run.fill(mul(0.0, f));
    } else {
        // x86 multiplies a NaN element into itself, quieted: `mul`'s rule.
        for v in run {
            *v = scaled_as_on_x86(*v * f, *v);
        }
    }
}

/// Elements per piece of rows that dequantizing hands to a thread (a float32 buffer of this
/// many stays in the core's cache).
const PIECE_ELEMENTS: usize = 1 << 14;

/// Elements per piece of rows for the one-pass forms, which need no buffer: each piece ends
/// with a store fence, which waits until the streamed lines have reached memory, so a piece is
/// large enough for that wait to be rare: at [`PIECE_ELEMENTS`] (32 KiB of bfloat16 a fence)
/// the fences held large dequantizations well below memory speed, at 2^18 (512 KiB a fence)
/// they do not.
const ONE_PASS_PIECE_ELEMENTS: usize = 1 << 18;

/// The code of element `i` (float4: packed two per byte, the first in the low nibble).
#[inline(always)]
fn code(elements: &[u8], scheme: &Scheme, i: usize) -> usize {
    if scheme.element.is_packed() {
        usize::from(elements[i / 2] >> (4 * (i % 2)) & 0xF)
    } else {
        usize::from(elements[i])
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

/// `bytes` zero bytes for the `what` buffer, or [`QuantError::Memory`] where they cannot be
/// allocated (instead of the abort an infallible allocation would be).
pub(crate) fn zeroed(bytes: usize, what: &'static str) -> Result<Vec<u8>, QuantError> {
    // Zeroed by the allocator, large ones on huge pages: the first writes fault far less.
    dtcast_cast::zeroed_vec(bytes).ok_or(QuantError::Memory { what, bytes })
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
