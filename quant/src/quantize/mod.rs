//! Dense floats to scaled elements, as each reference quantizes.
//!
//! [`quantize`] / [`quantize_into`] / [`quantize_rows`] (a band of rows at a time, for
//! streaming; [`TensorAmax`] for per-tensor and global scales) work by **bands of rows that share
//! no scales**: each band's amaxes straight from storage, its plan (the reference's scale rule,
//! `rules.rs`: each reference's scales, factors and element arithmetic from the amaxes), then its
//! elements while the band is in cache. The bands run last first, so that each thread starts on
//! input the tensor pass left in the shared cache; a band's float8 runs prefetch the same runs of
//! the band before it (the thread's next, `simd::prefetch`), as do the float4 comparisons of a
//! band whose maxima were just found in it, so that its amax reads them from the cache while this
//! band's arithmetic runs; the one-pass loops that read from memory ask for their input
//! `simd::AHEAD` bytes ahead.
//!
//! **The general path is the definition.** A band holding inf or NaN takes it: the elements
//! scaled and clamped into a float32 buffer (loops compiled for the instruction set
//! `dtcast_cast::isa()` chose, `simd.rs`), encoded by a SIMD cast, the references' own float4
//! code functions kept for NaN and -0. Every faster form below is tested against it:
//! - float4 groups on AVX-512 in one pass in registers (`encode4.rs`); float8 runs that share a
//!   factor in one pass, on 16-bit lanes where the arithmetic is bfloat16's or float16's
//!   (`encode8.rs`; compressed-tensors' FP8 of bfloat16 weights multiplies by the scale's
//!   reciprocal, `reciprocal_serves_bf16`: the same bfloat16 for every element); MX float8 of
//!   16-bit weights as exponent shifts (`encode8::pow2_groups`);
//! - float4 codes of 16-bit weights whose factors are picked by a scale byte (NVFP4, and
//!   compressed-tensors' MX) by comparisons with thresholds found once per tensor, input dtype
//!   and thread (`thresholds.rs`); where a tensor has many scales, `rules::ScaleCodes` replaces
//!   the bands' plans by a table of every magnitude's scale byte;
//! - group maxima of 16-bit floats by a tree of register permutes (`amax16.rs`), a row of 2-D
//!   blocks' maxima from each column's running maximum over the band (`Job::block_amax`), and
//!   compressed-tensors' MX and NVFP4 scale rules as one vectorised loop where every amax is
//!   finite (`rules::compressed_tensors_mx_finite`, `compressed_tensors_nvfp4_finite`).
//!
//! Without AVX-512 the same steps run on one element in loops LLVM vectorises for the chosen
//! set; all of them round through `narrow.rs` (one nearest-even algorithm over a narrow format's
//! constants). The AVX-512 loops are `#[target_feature]` functions of their own, never inlined
//! into one without (where every intrinsic would become a call).
//!
//! **Weights**: bfloat16, float32, and (compressed-tensors' rules only, `Scheme::check_input`)
//! float16, whose arithmetic is float16's (the rules' eps and tiny from the dtype table,
//! `rules::finfo`; the input's infinity and NaN from `arith::half_inf_bits`). NVFP4's tensor pass
//! is a plain amax reduction: each band finds its group maxima again, from the cache its prefetch
//! filled.

use dtcast_cast::{cast, CastMode};
use dtcast_dtype::DType;
use rayon::prelude::*;

use crate::arith::{
    cvtt, div, f16_value, half_inf_bits, half_value, internal, mul, pow2, round_bf16, round_f16,
    round_in, scaled_as_on_x86, DEFAULT_NAN,
};
use crate::dequant::{check_len, rows_cols, zeroed, Quantized};
use crate::rules::{
    compressed_tensors_fp8, compressed_tensors_mx, compressed_tensors_mx_finite,
    compressed_tensors_nvfp4, compressed_tensors_nvfp4_finite, torchao_mx, torchao_mx_rceil,
    torchao_nvfp4, Apply, Plan, ScaleCodes,
};
use crate::scheme::{Convention, Granularity, MxRounding, ScaleRule, Scheme};
use crate::simd::{prefetch, with_best_isa};
use crate::QuantError;
use crate::{amax16, encode4, encode8, thresholds};

mod bands;
mod codes;
mod encode;
mod input;
mod job;
#[cfg(test)]
mod tests;

use self::bands::*;
use self::codes::*;
use self::input::*;
pub(crate) use self::input::{amax_nan_is_default, fold_amax, reads_nan_as_default};
pub(crate) use self::job::Job;

/// What [`quantize`] writes: the elements (float4: packed, low nibble first), the scales in the
/// scheme's layout and dtype, and the global scale where the scheme has one.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedTensor {
    /// The elements in storage.
    pub elements: Vec<u8>,
    /// The scales in storage.
    pub scales: Vec<u8>,
    /// The tensor's global scale (compressed-tensors' `weight_global_scale`, torchao's
    /// `per_tensor_scale`).
    pub global_scale: Option<f32>,
}

impl QuantizedTensor {
    /// The tensor as [`dequantize`](crate::dequantize) reads it.
    pub fn view<'a>(&'a self, shape: &'a [usize]) -> Quantized<'a> {
        Quantized {
            elements: &self.elements,
            shape,
            scales: &self.scales,
            global_scale: self.global_scale,
        }
    }
}

/// Quantizes `src` (elements of `dtype`, row-major in `shape`: float32 or bfloat16, or float16
/// under compressed-tensors' rules — [`Scheme::check_input`]) with `scheme`, bit for bit as the
/// scheme's reference does — with its arithmetic in the weight's dtype where it computes there
/// (compressed-tensors divides bfloat16 by bfloat16, float16 by float16, rounding twice). Shapes
/// the reference refuses are errors here too.
///
/// DeepSeek and gpt-oss publish no weight quantizer; their conventions quantize as their published
/// checkpoints were made: DeepSeek-V3 block FP8 is compressed-tensors' block rule computed in
/// float32 (`amax / 448` as a float32 scale, `x / scale`), gpt-oss MXFP4 is torchao's RCEIL rule
/// (OpenAI's `ROUND_UP`). gpt-oss's transposition to `[experts, rows, cols]` is the caller's: this
/// quantizes the rows it is given.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{dequantize, quantize, Scheme};
/// let x: Vec<u8> = [1.0f32, -2.0, 448.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let scheme = Scheme::named("ct_fp8_tensor", DType::Float32)?;
/// let q = quantize(&x, DType::Float32, &[1, 4], &scheme)?;
/// assert_eq!(q.scales, 1.0f32.to_le_bytes()); // amax 448 / 448
/// assert_eq!(q.elements, [0x38, 0xC0, 0x7E, 0x28]); // 1, -2, 448, 0.25 in float8_e4m3fn
/// let back = dequantize(&q.view(&[1, 4]), &scheme, DType::Float32)?;
/// assert_eq!(back, x);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn quantize(
    src: &[u8],
    dtype: DType,
    shape: &[usize],
    scheme: &Scheme,
) -> Result<QuantizedTensor, QuantError> {
    let job = Job::new(dtype, shape, scheme)?;
    check_len("input", job.input_bytes(job.rows)?, src.len())?;
    let mut elements = zeroed(job.element_bytes(job.rows), "elements")?;
    let mut scales = scheme.scale_buffer(job.rows, job.cols)?;
    let amax = job.tensor_amax(src);
    let global_scale = job.rows_into(src, 0..job.rows, amax, &mut elements, &mut scales)?;
    Ok(QuantizedTensor {
        elements,
        scales,
        global_scale,
    })
}

/// [`quantize`] into buffers of the caller's (`elements`, `scales`: exactly the quantized
/// tensor's bytes), so that a conversion can reuse its buffers; returns the global scale where
/// the scheme has one. On error the buffers hold nothing meaningful.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{quantize_into, Scheme};
/// let x: Vec<u8> = [1.0f32, -2.0, 448.0, 0.25].iter().flat_map(|v| v.to_le_bytes()).collect();
/// let scheme = Scheme::named("ct_fp8_tensor", DType::Float32)?;
/// let (mut elements, mut scales) = ([0u8; 4], [0u8; 4]);
/// assert_eq!(quantize_into(&x, DType::Float32, &[1, 4], &scheme, &mut elements, &mut scales)?, None);
/// assert_eq!(elements, [0x38, 0xC0, 0x7E, 0x28]);
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub fn quantize_into(
    src: &[u8],
    dtype: DType,
    shape: &[usize],
    scheme: &Scheme,
    elements: &mut [u8],
    scales: &mut [u8],
) -> Result<Option<f32>, QuantError> {
    let job = Job::new(dtype, shape, scheme)?;
    check_len("input", job.input_bytes(job.rows)?, src.len())?;
    let amax = job.tensor_amax(src);
    job.rows_into(src, 0..job.rows, amax, elements, scales)
}

/// The largest magnitude of a tensor's elements, by the rule the references' `amax` follows (a
/// NaN is the result: the first one): what a per-tensor scale and a global scale are computed
/// from. Built from the tensor's rows a piece at a time ([`TensorAmax::update`]), for
/// [`quantize_rows`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TensorAmax(f32);

impl TensorAmax {
    /// Takes in the next elements of the tensor (`src`: elements of `dtype`, in order), read as
    /// `scheme`'s reference reads them.
    pub fn update(&mut self, src: &[u8], dtype: DType, scheme: &Scheme) -> Result<(), QuantError> {
        scheme.check_input(dtype)?;
        let size = dtype.byte_size().unwrap_or(4);
        if !src.len().is_multiple_of(size) {
            return Err(QuantError::Shape {
                reason: format!("{} bytes are not whole {dtype} elements", src.len()),
            });
        }
        let input = Input::new(src, dtype, scheme);
        self.0 = fold_amax(self.0, tensor_amax_pass(&input, src.len() / size));
        Ok(())
    }

    /// The largest magnitude so far (0 for none).
    pub fn value(self) -> f32 {
        self.0
    }
}

/// Rows `rows` of a tensor of `shape` (`src`: those rows, elements of `dtype`) quantized into
/// `elements` and `scales` (exactly those rows' elements, and the scales
/// [`Scheme::scale_range`] names for them): a tensor quantizes a band of rows at a time, in any
/// order, to the bytes [`quantize`] gives. The band starts at a multiple of
/// [`Scheme::row_alignment`] and ends at one or at the tensor's end (a 2-D block's scale needs
/// its block's rows together). `amax` is the whole tensor's ([`TensorAmax`]) where the scheme
/// [uses one](Scheme::uses_tensor_amax) (else unused). Returns the global scale where the scheme
/// has one.
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{quantize, quantize_rows, Scheme, TensorAmax};
/// // A [4, 32] float32 tensor, MXFP8 (a scale per row of 32), quantized two rows at a time.
/// let x: Vec<u8> = (0..128).flat_map(|i| (i as f32 - 60.0).to_le_bytes()).collect();
/// let scheme = Scheme::named("ct_mxfp8", DType::Float32)?;
/// let whole = quantize(&x, DType::Float32, &[4, 32], &scheme)?;
/// let (mut elements, mut scales) = (vec![0u8; 128], vec![0u8; 4]);
/// for first in [0, 2] {
///     let at = first * 32..(first + 2) * 32;
///     quantize_rows(&x[at.start * 4..at.end * 4], DType::Float32, &[4, 32], first..first + 2,
///         &scheme, TensorAmax::default(), &mut elements[at], &mut scales[first..first + 2])?;
/// }
/// assert_eq!((elements, scales), (whole.elements, whole.scales));
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn quantize_rows(
    src: &[u8],
    dtype: DType,
    shape: &[usize],
    rows: std::ops::Range<usize>,
    scheme: &Scheme,
    amax: TensorAmax,
    elements: &mut [u8],
    scales: &mut [u8],
) -> Result<Option<f32>, QuantError> {
    let job = Job::new(dtype, shape, scheme)?;
    let alignment = scheme.row_alignment();
    let (first, end) = (rows.start, rows.end);
    if first > end
        || end > job.rows
        || first % alignment != 0
        || (end % alignment != 0 && end != job.rows)
    {
        return Err(QuantError::Shape {
            reason: format!(
                "rows {first}..{end} of a tensor of {} rows: a band of rows starts at a multiple of {alignment} and ends at one or at the tensor's end",
                job.rows
            ),
        });
    }
    check_len("input", job.input_bytes(end - first)?, src.len())?;
    job.rows_into(src, rows, amax.0, elements, scales)
}
