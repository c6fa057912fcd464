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
//!   finite (`rules::ct_mx_finite`, `ct_nvfp4_finite`).
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
    ao_mx, ao_mx_rceil, ao_nvfp4, ct_fp8, ct_mx, ct_mx_finite, ct_nvfp4, ct_nvfp4_finite, Apply,
    Plan, ScaleCodes,
};
use crate::scheme::{Convention, Granularity, MxRounding, ScaleRule, Scheme};
use crate::simd::{prefetch, with_best_isa};
use crate::QuantError;
use crate::{amax16, encode4, encode8, thresholds};

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

/// One tensor's quantization: its checked shape and scheme, and what its elements are clamped to.
pub(crate) struct Job<'a> {
    dtype: DType,
    rows: usize,
    cols: usize,
    scheme: &'a Scheme,
    element_max: f32,
    /// Whether the one-pass forms may serve (`amax16`, `encode4`); the tests turn them off to
    /// hold them to the general path.
    fused: bool,
}

impl<'a> Job<'a> {
    /// The checks every entry point makes: an input dtype the scheme's reference quantizes, a
    /// valid scheme, a shape it accepts.
    pub(crate) fn new(
        dtype: DType,
        shape: &[usize],
        scheme: &'a Scheme,
    ) -> Result<Job<'a>, QuantError> {
        scheme.check_input(dtype)?;
        scheme.check()?;
        if !scheme.quantizes() {
            return Err(QuantError::Scheme {
                reason: "ModelOpt's NVFP4 (modelopt_nvfp4) is read, not written: quantize with \
                         ct_nvfp4 (compressed-tensors' rule) or ao_nvfp4_two_level"
                    .to_owned(),
            });
        }
        let (rows, cols) = rows_cols(shape)?;
        scheme.scale_bytes(rows, cols)?;
        if scheme.element.is_packed() && cols % 2 != 0 {
            return Err(QuantError::Shape {
                reason: format!("columns {cols} are odd; float4 elements are stored two per byte"),
            });
        }
        let element_max = if scheme.element == DType::Float8E4M3Fn {
            448.0
        } else {
            6.0
        };
        let job = Job {
            dtype,
            rows,
            cols,
            scheme,
            element_max,
            fused: true,
        };
        // The convention's refusal, and its scales' size, before any work.
        let stored = job.plan(&[1.0], 0.0)?.scales.len();
        if Some(stored) != scheme.scale.byte_size() {
            return Err(QuantError::Scheme {
                reason: format!(
                    "the scheme stores {} scales, but the {:?} convention stores a {dtype} weight's scales in {stored} bytes (compressed-tensors keeps FP8 scales in the weight's dtype: name the scheme for the weight's dtype)",
                    scheme.scale, scheme.convention
                ),
            });
        }
        Ok(job)
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    pub(crate) fn scheme(&self) -> &'a Scheme {
        self.scheme
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }

    /// The element format's largest magnitude (448 or 6).
    pub(crate) fn element_max(&self) -> f32 {
        self.element_max
    }

    /// The bytes of `rows` rows of input.
    fn input_bytes(&self, rows: usize) -> Result<usize, QuantError> {
        rows.checked_mul(self.cols)
            .and_then(|n| n.checked_mul(self.dtype.byte_size().unwrap_or(4)))
            .ok_or_else(|| QuantError::Shape {
                reason: format!(
                    "{rows} rows of {} columns have more bytes than memory can hold",
                    self.cols
                ),
            })
    }

    /// The stored bytes of `rows` rows of elements (`Job::new` checked the shape).
    fn element_bytes(&self, rows: usize) -> usize {
        self.scheme
            .element
            .storage_bytes(rows * self.cols)
            .unwrap_or(0)
    }

    /// The stored bytes of rows `start..end`'s scales.
    fn scale_bytes(&self, start: usize, end: usize) -> usize {
        self.scheme.scale_range(start, end, self.cols).len()
            * self.scheme.scale.byte_size().unwrap_or(1)
    }

    /// The whole tensor's amax where a scale depends on it (a per-tensor scale, a global
    /// scale): a first pass over the input, a reduction that reads at memory speed. 0 where
    /// nothing needs it. (It once kept every group's maximum for the bands too: writing those
    /// and reading them back cost more than finding them again from the core's cache.)
    fn tensor_amax(&self, src: &[u8]) -> f32 {
        if !self.scheme.uses_tensor_amax() {
            return 0.0;
        }
        tensor_amax_pass(
            &Input::new(src, self.dtype, self.scheme),
            self.rows * self.cols,
        )
    }

    /// compressed-tensors' NVFP4 scales of bfloat16 or float16 groups as a table by maximum (see
    /// [`ScaleCodes`]) under the plan's global scale, where the scheme is that, the tensor's
    /// amax finite, and `scales` (how many the rows have) at least half the table's entries:
    /// building it costs about as much as planning that many scales.
    fn scale_codes(
        &self,
        tensor_amax: f32,
        global: Option<f32>,
        scales: usize,
    ) -> Option<ScaleCodes> {
        let scheme = self.scheme;
        let serves = self.fused
            && matches!(self.dtype, DType::BFloat16 | DType::Float16)
            && scheme.convention == Convention::CompressedTensors
            && scheme.rule == ScaleRule::AbsMax
            && scheme.global_scale
            && scheme.granularity == Granularity::Group(16);
        let top = ScaleCodes::top(tensor_amax, self.dtype)?;
        let entries = usize::from(top) + 1;
        if !serves || scales * 2 < entries {
            return None;
        }
        ScaleCodes::new(top, global?, self.dtype)
    }

    /// The plan for a run of consecutive scales, from their amax (and the tensor's).
    pub(crate) fn plan(&self, amax: &[f32], tensor_amax: f32) -> Result<Plan, QuantError> {
        let (scheme, dtype, element_max) = (self.scheme, self.dtype, self.element_max);
        if self.fused {
            if let Some(plan) = self.plan_finite(amax, tensor_amax) {
                return Ok(plan);
            }
        }
        Ok(match (scheme.convention, scheme.rule) {
            (Convention::CompressedTensors, ScaleRule::AbsMax) if scheme.global_scale => {
                ct_nvfp4(amax, tensor_amax, dtype)
            }
            (Convention::CompressedTensors, ScaleRule::AbsMax) => ct_fp8(amax, dtype),
            (Convention::CompressedTensors, ScaleRule::PowerOfTwo(_)) => ct_mx(amax, dtype, scheme),
            (Convention::TorchAo, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                ao_mx_rceil(amax, element_max)
            }
            (Convention::TorchAo, ScaleRule::PowerOfTwo(rounding)) => ao_mx(amax, rounding, scheme),
            (Convention::TorchAo, ScaleRule::AbsMax) => ao_nvfp4(amax, tensor_amax, scheme),
            (Convention::DeepSeek, ScaleRule::AbsMax) if !scheme.global_scale => {
                ct_fp8(amax, DType::Float32)
            }
            (Convention::GptOss, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                ao_mx_rceil(amax, element_max)
            }
            (convention, _) => {
                return Err(QuantError::Scheme {
                    reason: format!(
                        "quantizing with the {convention:?} convention is not supported"
                    ),
                })
            }
        })
    }

    /// [`Job::plan`] for the hot schemes — compressed-tensors' MX and NVFP4 — where every amax
    /// is finite (nearly every band): the same arithmetic as one loop over the scales that LLVM
    /// vectorises, instead of a pass per step. `None` where it does not serve.
    fn plan_finite(&self, amax: &[f32], tensor_amax: f32) -> Option<Plan> {
        let scheme = self.scheme;
        // Below this, an amax rounded at float4's mantissa width stays finite: in float32 (and
        // bfloat16) up to 0x7F60_0000; float16's MX rounds its amax to a power of two in float16,
        // which is inf from 1.75 * 2^15 (the general rule's business). (The largest bits by a
        // fold, which LLVM vectorises: `all` stops early, one scale at a time.)
        let limit = match scheme.rule {
            ScaleRule::PowerOfTwo(_) if self.dtype == DType::Float16 => 0x4760_0000,
            ScaleRule::PowerOfTwo(_) | ScaleRule::AbsMax => 0x7F60_0000,
        };
        if scheme.convention != Convention::CompressedTensors
            || amax.is_empty()
            || (amax.iter()).fold(0, |top, a| top.max(a.to_bits())) >= limit
        {
            return None;
        }
        match scheme.rule {
            ScaleRule::PowerOfTwo(_) => {
                let offset = if scheme.element == DType::Float8E4M3Fn {
                    8
                } else {
                    2
                };
                Some(with_best_isa(
                    #[inline(always)]
                    || ct_mx_finite(amax, offset, self.dtype),
                ))
            }
            ScaleRule::AbsMax if scheme.global_scale => {
                let g = ct_nvfp4(&[], tensor_amax, self.dtype).global?;
                Some(with_best_isa(
                    #[inline(always)]
                    || ct_nvfp4_finite(amax, g, self.dtype),
                ))
            }
            ScaleRule::AbsMax => None,
        }
    }

    /// Rows `rows` (`src`: their bytes, checked by the caller) into `elements` and their scales
    /// into `scales`; returns the global scale.
    fn rows_into(
        &self,
        src: &[u8],
        rows: std::ops::Range<usize>,
        tensor_amax: f32,
        elements: &mut [u8],
        scales: &mut [u8],
    ) -> Result<Option<f32>, QuantError> {
        let (cols, scheme) = (self.cols, self.scheme);
        let (first_row, end) = (rows.start, rows.end);
        let count = end - first_row;
        check_len("elements", self.element_bytes(count), elements.len())?;
        check_len("scales", self.scale_bytes(first_row, end), scales.len())?;
        let global_scale = self.plan(&[], tensor_amax)?.global;
        let input = Input::new(src, self.dtype, scheme);
        let storage = |rows: usize| self.element_bytes(rows);
        if scheme.granularity == Granularity::Tensor {
            // One scale, the tensor's (whatever rows these are): elementwise after it, so pieces
            // of rows on the thread pool.
            let plan = self.plan(&[tensor_amax], tensor_amax)?;
            let piece_rows = (PIECE_ELEMENTS / cols.max(1)).max(1);
            if count > 0 && cols > 0 {
                elements
                    .par_chunks_mut(storage(piece_rows))
                    .enumerate()
                    .try_for_each_init(Vec::new, |buf, (p, out)| {
                        let at = Rows {
                            local: p * piece_rows,
                            first_row,
                            first_scale: 0,
                            next: None,
                        };
                        self.encode(&input, &at, &plan, out, buf)
                    })?;
            }
            scales.copy_from_slice(&plan.scales);
            return Ok(global_scale);
        }
        if count == 0 || cols == 0 {
            // No elements: each scale of the rows is the scale of an all-zero block, planned
            // once (the rows may be many: 2^40 rows of no columns have 2^40 channel scales).
            let zero = self.plan(&[0.0], tensor_amax)?.scales;
            if !zero.is_empty() {
                scales
                    .chunks_exact_mut(zero.len())
                    .for_each(|s| s.copy_from_slice(&zero));
            }
            return Ok(global_scale);
        }
        // Bands of rows whose scales no other rows share, on the thread pool: each band's amax,
        // its plan, then its elements while the band's input is still in the core's cache — the
        // input is read from memory once.
        let band = match scheme.granularity {
            Granularity::Block(br, _) => br,
            Granularity::Tensor | Granularity::Channel | Granularity::Group(_) => {
                (BAND_ELEMENTS / cols).max(1)
            }
        };
        let scale_size = scheme.scale.byte_size().unwrap_or(1);
        let first_scale = scheme.scale_range(first_row, end, cols).start;
        let band_scales = scheme.scale_range(0, band.min(self.rows), cols).len();
        // compressed-tensors' NVFP4 scales by each band's group maxima, looked up.
        let scale_count = scheme.scale_range(first_row, end, cols).len();
        let codes = self.scale_codes(tensor_amax, global_scale, scale_count);
        // Last band first: each thread then starts where the tensor pass (first band first)
        // ended, on input still in the shared cache.
        elements
            .par_chunks_mut(storage(band))
            .zip(scales.par_chunks_mut(band_scales * scale_size))
            .enumerate()
            .rev()
            .try_for_each_init(Default::default, |(buf, maxima), (b, (out, stored))| {
                let local = b * band;
                let band_first_scale = first_scale + b * band_scales;
                let band_groups = stored.len() / scale_size;
                let band_rows = local..(local + band).min(count);
                let at = Rows {
                    local,
                    first_row,
                    first_scale: band_first_scale,
                    // The bands run last first: a thread's next band is the one before. It is
                    // read ahead while this one is encoded from the cache, where finding this
                    // band's amax brought it there: its reads from memory overlap this band's
                    // arithmetic.
                    next: local.checked_sub(band),
                };
                let src = input.bytes(local * cols, band_rows.len() * cols);
                let mut known = None;
                if let Some(codes) = &codes {
                    // The band's group maxima, then its scale bytes looked up as the groups are
                    // encoded from the cache (else the steps below, from those maxima).
                    let maxima: &mut Vec<u16> = maxima;
                    maxima.resize(band_groups, 0);
                    amax16::group_maxima(src, 16, maxima);
                    let elements = band_rows.len() * cols;
                    let next = (at.next).map_or(&[][..], |n| input.bytes(n * cols, elements));
                    if codes.encode(src, maxima, stored, out, next) {
                        return Ok(());
                    }
                    known = Some(&maxima[..]);
                }
                let mut amax = vec![0f32; band_groups];
                self.band_amax(&input, band_rows, &at, known, &mut amax);
                let plan = self.plan(&amax, tensor_amax)?;
                stored.copy_from_slice(&plan.scales);
                self.encode(&input, &at, &plan, out, buf)
            })?;
        Ok(global_scale)
    }

    /// Input rows from `at.local`, as many as fill `out`, into `out`'s elements: in one pass
    /// where a fused form serves, else [`Job::encode_general`].
    fn encode(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> Result<(), QuantError> {
        // (Each takes what it reads: `encode8` every input dtype, `encode_fused` float16 by the
        // float4 comparisons only.)
        if self.fused {
            let done = if encode8::supports(self.scheme.element, plan.clamp) {
                self.encode_float8(input, at, plan, out)
            } else {
                self.encode_fused(input, at, plan, out, buf)
            };
            if done {
                return Ok(());
            }
        }
        self.encode_general(input, at, plan, out, buf)
    }

    /// The amax of every scale of the input's rows `band` into `amax`: bfloat16 or float16
    /// groups of 16 or 32 from their maxima (`known`: found already, else by `amax16`'s permute
    /// tree; a group holding a NaN by the sequential rule), the rest by [`Input::band_amax`].
    fn band_amax(
        &self,
        input: &Input,
        band: std::ops::Range<usize>,
        at: &Rows,
        known: Option<&[u16]>,
        amax: &mut [f32],
    ) {
        let (cols, scheme, dtype) = (self.cols, self.scheme, self.dtype);
        let sixteen_bits = matches!(dtype, DType::BFloat16 | DType::Float16);
        let inf = half_inf_bits(dtype);
        if let Granularity::Group(k @ (16 | 32)) = scheme.granularity {
            if self.fused && sixteen_bits {
                let first = band.start * cols;
                let mut found = Vec::new();
                let maxima = known.unwrap_or_else(|| {
                    found.resize(amax.len(), 0);
                    amax16::group_maxima(input.bytes(first, amax.len() * k), k, &mut found);
                    &found
                });
                // The maxima as float32 (a loop LLVM vectorises), then any group with a NaN by
                // the sequential rule.
                let nan = (amax.iter_mut().zip(maxima)).fold(false, |nan, (a, &m)| {
                    *a = half_value(m, dtype);
                    nan | (m > inf)
                });
                if nan {
                    for (g, a) in amax.iter_mut().enumerate().filter(|(_, a)| a.is_nan()) {
                        *a = input.amax(first + g * k, k, 0.0);
                    }
                }
                return;
            }
        }
        if let Granularity::Block(block_rows, _) = scheme.granularity {
            let (first, last) = (at.first_row + band.start, at.first_row + band.end);
            // (Rows of one row of blocks: what a band of a 2-D-block scheme always is.)
            let one_row_of_blocks = first < last && first / block_rows == (last - 1) / block_rows;
            if self.fused && sixteen_bits && one_row_of_blocks {
                self.block_amax(input, band, at, amax);
                return;
            }
        }
        with_best_isa(
            #[inline(always)]
            || input.band_amax(band, at, cols, scheme, amax),
        );
    }

    /// [`Job::band_amax`] of bfloat16 or float16 rows `band` that lie in one row of 2-D blocks:
    /// each column's largest magnitude bits over the rows (a vertical maximum LLVM vectorises,
    /// with no reduction per row), then each block's over its columns. A block holding a NaN
    /// takes the sequential rule over its rows in order.
    fn block_amax(&self, input: &Input, band: std::ops::Range<usize>, at: &Rows, amax: &mut [f32]) {
        let cols = self.cols;
        let mut columns = vec![0u16; cols];
        with_best_isa(
            #[inline(always)]
            || {
                for local in band.clone() {
                    let row = input.bytes(local * cols, cols).as_chunks::<2>().0;
                    for (m, b) in columns.iter_mut().zip(row) {
                        *m = (*m).max(u16::from_le_bytes(*b) & 0x7FFF);
                    }
                }
            },
        );
        let (dtype, inf) = (self.dtype, half_inf_bits(self.dtype));
        for (start, end, k) in self.scheme.runs(at.first_row + band.start, cols) {
            let m = columns[start..end].iter().copied().max().unwrap_or(0);
            amax[k - at.first_scale] = if m > inf {
                band.clone().fold(0.0, |a, local| {
                    input.amax(local * cols + start, end - start, a)
                })
            } else {
                half_value(m, dtype)
            };
        }
    }

    /// A band of float4 groups (the input's rows from `at.local`, as many as fill `out`; the
    /// plan the band's) in one pass (`encode4`), where it serves: false where it does not, or
    /// where an element is inf or NaN, for the general path to do.
    fn encode_fused(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> bool {
        let scheme = self.scheme;
        let Granularity::Group(k) = scheme.granularity else {
            return false;
        };
        let groups = out.len() * 2 / k;
        let unsigned_zero = scheme.convention == Convention::CompressedTensors;
        // Factors picked by one-byte scales (compressed-tensors' NVFP4 and MX): each element
        // compared with its scale byte's thresholds instead of scaled and rounded.
        let sixteen_bits = matches!(self.dtype, DType::BFloat16 | DType::Float16);
        if let Some(by_byte) = plan.byte_factors.as_deref() {
            if sixteen_bits
                && plan.scales.len() == groups
                && thresholds::supports(scheme.element, k)
            {
                let rules = encode4::Rules {
                    divide: matches!(plan.apply, Apply::Divide),
                    arithmetic: plan.arithmetic,
                    unsigned_zero,
                };
                let src = input.bytes(at.local * self.cols, groups * k);
                let scales = thresholds::ScaleBytes::Given(&plan.scales);
                let next = (at.next).map_or(&[][..], |n| input.bytes(n * self.cols, groups * k));
                let bounded = plan.bounded;
                let dtype = self.dtype;
                return thresholds::encode(
                    src, dtype, k, scales, by_byte, rules, bounded, out, next,
                );
            }
        }
        // (`encode4` reads float32 and bfloat16.)
        let read = matches!(self.dtype, DType::Float32 | DType::BFloat16);
        if !read || !encode4::supports(scheme.element, k) || plan.factors.len() != groups {
            return false;
        }
        if self.dtype == DType::BFloat16 {
            // Every factor a power of two (MX scales): the product is an exponent shift.
            let shifts: Option<Vec<i32>> = (plan.factors.iter())
                .map(|&f| {
                    let k = encode4::power_of_two_exponent(f)?;
                    Some(if matches!(plan.apply, Apply::Divide) {
                        -k
                    } else {
                        k
                    })
                })
                .collect();
            if let Some(shifts) = shifts.filter(|s| s.iter().all(|k| k.abs() <= 127)) {
                let src = input.bytes(at.local * self.cols, groups * k);
                if encode4::encode_pow2(src, k, &shifts, unsigned_zero, out) {
                    return true;
                }
            }
        }
        // (A fold rather than `all`, so that the check is vectorised.)
        let usable = (plan.factors.iter()).fold(true, |ok, f| ok & f.is_finite() & (*f != 0.0));
        if !usable {
            return false;
        }
        // Dividing by a normal power of two is multiplying by its reciprocal (as `scale_run`).
        let (divide, factors) = match plan.apply {
            Apply::Multiply => (false, &plan.factors[..]),
            Apply::Divide if plan.factors.iter().all(|&f| normal_power_of_two(f)) => {
                buf.clear();
                buf.extend(plan.factors.iter().map(|f| 1.0 / f));
                (false, &buf[..])
            }
            Apply::Divide => (true, &plan.factors[..]),
        };
        let rules = encode4::Rules {
            divide,
            arithmetic: plan.arithmetic,
            unsigned_zero,
        };
        let src = input.bytes(at.local * self.cols, groups * k);
        encode4::encode(src, self.dtype == DType::BFloat16, k, factors, rules, out)
    }

    /// The input's rows from `rows.local` (as many as fill `out`) to float8_e4m3fn in one pass
    /// (`encode8`), a run of elements that share a factor at a time: false where an element is
    /// inf or NaN or a factor is not finite and nonzero, for the general path to do.
    fn encode_float8(&self, input: &Input, rows: &Rows, plan: &Plan, out: &mut [u8]) -> bool {
        let (cols, scheme) = (self.cols, self.scheme);
        let usable = (plan.factors.iter()).fold(true, |ok, f| ok & f.is_finite() & (*f != 0.0));
        if !usable || cols == 0 {
            return false;
        }
        let bf16 = self.dtype == DType::BFloat16;
        let sixteen_bits = bf16 || self.dtype == DType::Float16;
        let divide = matches!(plan.apply, Apply::Divide);
        if sixteen_bits && scheme.granularity == Granularity::Group(32) {
            // MX: every factor a power of two, so each group is an exponent shift, and the
            // rounding runs on 16-bit lanes (the runs below where an element needs them).
            let first = (rows.first_row + rows.local) * (cols / 32) - rows.first_scale;
            let factors = plan.factors.get(first..first + out.len() / 32);
            let shifts: Option<Vec<i32>> = factors.and_then(|factors| {
                (factors.iter())
                    .map(|&f| {
                        encode4::power_of_two_exponent(f).map(|k| if divide { -k } else { k })
                    })
                    .collect()
            });
            if let Some(shifts) = shifts {
                let src = input.bytes(rows.local * cols, out.len());
                if encode8::pow2_groups(src, self.dtype, &shifts, out) {
                    return true;
                }
            }
        }
        let rules = |divide| encode4::Rules {
            divide,
            arithmetic: plan.arithmetic,
            unsigned_zero: false,
        };
        // Dividing by a normal power of two is multiplying by its reciprocal (as `scale_run`),
        // and so is dividing a bfloat16 by a bfloat16 where the quotient is rounded to bfloat16
        // (`reciprocal_serves_bf16`).
        let (by_division, by_product) = (
            encode8::kernel(self.dtype, rules(divide)),
            encode8::kernel(self.dtype, rules(false)),
        );
        let bf16_quotients = bf16 && plan.arithmetic == DType::BFloat16;
        for (j, row) in out.chunks_exact_mut(cols).enumerate() {
            let local = rows.local + j;
            for (start, end, g) in scheme.runs(rows.first_row + local, cols) {
                let f = plan.factors[g - rows.first_scale];
                let (kernel, f) = match encode4::power_of_two_exponent(f) {
                    Some(k) if divide && (-126..=127).contains(&k) => (by_product, 1.0 / f),
                    _ if divide && bf16_quotients && reciprocal_serves_bf16(f) => {
                        (by_product, 1.0 / f)
                    }
                    _ => (by_division, f),
                };
                let src = input.bytes(local * cols + start, end - start);
                if let Some(next) = rows.next {
                    // The same run of the next piece: its amax then reads it from the cache, and
                    // this thread's reads from memory overlap its arithmetic.
                    prefetch(input.bytes((next + j) * cols + start, end - start));
                }
                // SAFETY: `supports` said this CPU runs the kernels' instruction set; `src`
                // holds the run's elements, one per byte of the run's output.
                if !unsafe { kernel(src, f, &mut row[start..end]) } {
                    return false;
                }
            }
        }
        true
    }

    /// [`Job::encode`] for every scheme: the elements scaled and clamped into a float32 buffer,
    /// then encoded by dtcast_cast's SIMD cast and, for float4, the references' codes where they
    /// differ from the cast.
    fn encode_general(
        &self,
        input: &Input,
        at: &Rows,
        plan: &Plan,
        out: &mut [u8],
        buf: &mut Vec<f32>,
    ) -> Result<(), QuantError> {
        let (cols, scheme) = (self.cols, self.scheme);
        let limit = if plan.clamp {
            self.element_max
        } else {
            f32::INFINITY
        };
        let piece_rows = (PIECE_ELEMENTS / cols).max(1);
        for (p, out) in out.chunks_mut(self.element_bytes(piece_rows)).enumerate() {
            let count = out.len() * 8 / scheme.element.bits();
            buf.resize(count, 0.0);
            let rows = Rows {
                local: at.local + p * piece_rows,
                next: None,
                ..*at
            };
            let special = with_best_isa(
                #[inline(always)]
                || input.scaled(&rows, cols, scheme, plan, limit, buf),
            );
            let wide: &[u8] = bytemuck::cast_slice(buf.as_slice());
            cast(wide, DType::Float32, out, scheme.element, CastMode::Torch).map_err(internal)?;
            if scheme.element == DType::Float4E2M1Fn {
                // float4 by the SIMD cast (nearest-even on the clamped magnitudes, as both
                // references round), then the references' own codes where they differ from it:
                // NaN, and compressed-tensors' -0 (its `x * sign(x)` is +0).
                let code = match scheme.convention {
                    Convention::CompressedTensors => ct_fp4_code,
                    Convention::TorchAo
                    | Convention::DeepSeek
                    | Convention::GptOss
                    | Convention::ModelOpt => ao_fp4_code,
                };
                if special {
                    for (i, &v) in buf.iter().enumerate().filter(|(_, v)| is_special(**v)) {
                        let shift = 4 * (i % 2);
                        out[i / 2] = out[i / 2] & !(0xF << shift) | code(v) << shift;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Where a piece of rows is: its first row in the input (`local`), the tensor's row the input
/// starts at, the index of the plan's first scale, and where known the first row of the piece
/// this thread takes next (`next`, as many rows), whose input is prefetched as this one is
/// encoded.
#[derive(Clone, Copy)]
struct Rows {
    local: usize,
    first_row: usize,
    first_scale: usize,
    next: Option<usize>,
}

/// Elements per band of rows that quantizing hands to a thread where every row has scales of
/// its own (its input stays in the core's cache between the amax and the element pass).
const BAND_ELEMENTS: usize = 1 << 17;

/// Elements per piece of the element pass (whole rows, at least one): its buffers stay in the
/// core's cache.
const PIECE_ELEMENTS: usize = 1 << 14;

/// Whether `scheme`'s reference reads a `dtype` input's NaNs as the default NaN: compressed-tensors
/// computes on bfloat16 tensors (torch: in float32, rounded back, a NaN coming back as 0x7FC0).
pub(crate) fn reads_nan_as_default(dtype: DType, scheme: &Scheme) -> bool {
    dtype == DType::BFloat16 && scheme.convention == Convention::CompressedTensors
}

/// Whether a scale's amax, where its elements hold a NaN, is the default NaN rather than the
/// first of them as the input reads: where the input's NaNs read as the default NaN, and for
/// float16 (torch's float16 reductions give the default NaN for any; compressed-tensors'
/// vectorised `maximum` with 0 then makes some of them 0xFFFF, which dtcast does not follow).
pub(crate) fn amax_nan_is_default(dtype: DType, scheme: &Scheme) -> bool {
    reads_nan_as_default(dtype, scheme) || dtype == DType::Float16
}

/// The tensor being quantized: its stored elements (float32, bfloat16 or float16), read as
/// float32.
struct Input<'a> {
    src: &'a [u8],
    dtype: DType,
    /// Bytes per element (read once from the dtype table, not in the loops).
    size: usize,
    /// NaN read as the positive default NaN (compressed-tensors' bfloat16 arithmetic).
    canonical_nan: bool,
    /// An amax holding a NaN is the default NaN ([`amax_nan_is_default`]).
    default_nan_amax: bool,
}

impl<'a> Input<'a> {
    /// `src` as `scheme`'s reference reads it: compressed-tensors computes on bfloat16 tensors
    /// (torch: in float32, rounded back, a NaN coming back as 0x7FC0); the others convert them to
    /// float32 first, bits kept.
    fn new(src: &'a [u8], dtype: DType, scheme: &Scheme) -> Input<'a> {
        Input {
            src,
            dtype,
            size: dtype.byte_size().unwrap_or(4),
            canonical_nan: reads_nan_as_default(dtype, scheme),
            default_nan_amax: amax_nan_is_default(dtype, scheme),
        }
    }

    /// The stored bytes of elements `first..first + count`.
    #[inline(always)]
    fn bytes(&self, first: usize, count: usize) -> &[u8] {
        &self.src[first * self.size..(first + count) * self.size]
    }

    /// Element `i` of `bytes` as float32 (a bfloat16 is the top half of its float32, a float16
    /// exactly converted, NaN bits kept; the default NaN where the input's NaNs are canonical).
    #[inline(always)]
    fn value(&self, bytes: &[u8], i: usize) -> f32 {
        let x = if self.dtype == DType::BFloat16 {
            f32::from_bits(u32::from(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]])) << 16)
        } else if self.dtype == DType::Float16 {
            f16_value(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]))
        } else {
            f32::from_le_bytes([
                bytes[4 * i],
                bytes[4 * i + 1],
                bytes[4 * i + 2],
                bytes[4 * i + 3],
            ])
        };
        if self.canonical_nan && x.is_nan() {
            DEFAULT_NAN
        } else {
            x
        }
    }

    /// The largest magnitude of elements `first..first + count` after `a` (the running value),
    /// as the sequential rule gives it: a NaN already there stays, else the first NaN of the run
    /// is the result (the default NaN where [`amax_nan_is_default`]), else the maximum. The
    /// magnitudes' bits compare as integers straight from storage (a loop LLVM vectorises); a
    /// NaN is looked for only when one is there.
    #[inline(always)]
    fn amax(&self, first: usize, count: usize, a: f32) -> f32 {
        if a.is_nan() {
            return a;
        }
        let bytes = self.bytes(first, count);
        let halves = || {
            (bytes.as_chunks::<2>().0.iter())
                .fold(0u16, |m, &b| m.max(u16::from_le_bytes(b) & 0x7FFF))
        };
        let m = if self.dtype == DType::BFloat16 {
            u32::from(halves()) << 16
        } else if self.dtype == DType::Float16 {
            f16_value(halves()).to_bits()
        } else {
            (bytes.as_chunks::<4>().0.iter())
                .fold(0u32, |m, &b| m.max(u32::from_le_bytes(b) & 0x7FFF_FFFF))
        };
        if m > 0x7F80_0000 {
            if self.default_nan_amax {
                return DEFAULT_NAN;
            }
            return (0..count)
                .map(|i| self.value(bytes, i))
                .find(|v| v.is_nan())
                .unwrap_or(a);
        }
        a.max(f32::from_bits(m))
    }

    /// The amax of every scale of the input's rows `band` (`at.first_scale` the first of them).
    #[inline(always)]
    fn band_amax(
        &self,
        band: std::ops::Range<usize>,
        at: &Rows,
        cols: usize,
        scheme: &Scheme,
        amax: &mut [f32],
    ) {
        for local in band {
            let r = at.first_row + local;
            match scheme.granularity {
                // Group sizes the formats use, known to the compiler.
                Granularity::Group(16) => {
                    let first = r * (cols / 16) - at.first_scale;
                    for (g, s) in amax[first..first + cols / 16].iter_mut().enumerate() {
                        *s = self.amax(local * cols + g * 16, 16, *s);
                    }
                }
                Granularity::Group(32) => {
                    let first = r * (cols / 32) - at.first_scale;
                    for (g, s) in amax[first..first + cols / 32].iter_mut().enumerate() {
                        *s = self.amax(local * cols + g * 32, 32, *s);
                    }
                }
                Granularity::Tensor
                | Granularity::Channel
                | Granularity::Group(_)
                | Granularity::Block(..) => {
                    for (start, end, k) in scheme.runs(r, cols) {
                        let s = &mut amax[k - at.first_scale];
                        *s = self.amax(local * cols + start, end - start, *s);
                    }
                }
            }
        }
    }

    /// The input's rows from `rows.local` (as many as fill `out`) scaled by their scales' factors
    /// in the plan's arithmetic, clamped to `limit`: the float32 values the element encoder
    /// rounds.
    #[inline(always)]
    fn scaled(
        &self,
        rows: &Rows,
        cols: usize,
        scheme: &Scheme,
        plan: &Plan,
        limit: f32,
        out: &mut [f32],
    ) -> bool {
        let mut special = false;
        for (j, row) in out.chunks_exact_mut(cols).enumerate() {
            let local = rows.local + j;
            let r = rows.first_row + local;
            special |= match scheme.granularity {
                // The group sizes the formats use, known to the compiler (each group's loop
                // unrolled).
                Granularity::Group(16) => self.groups::<16>(row, local, r, rows, plan, limit),
                Granularity::Group(32) => self.groups::<32>(row, local, r, rows, plan, limit),
                Granularity::Tensor
                | Granularity::Channel
                | Granularity::Group(_)
                | Granularity::Block(..) => {
                    let mut special = false;
                    for (start, end, g) in scheme.runs(r, cols) {
                        let f = plan.factors[g - rows.first_scale];
                        let src = self.bytes(local * cols + start, end - start);
                        special |= self.scale_run(src, f, plan, limit, &mut row[start..end]);
                    }
                    special
                }
            };
        }
        special
    }

    /// Row `r` (the input's row `local`) of groups of `K`.
    #[inline(always)]
    fn groups<const K: usize>(
        &self,
        row: &mut [f32],
        local: usize,
        r: usize,
        rows: &Rows,
        plan: &Plan,
        limit: f32,
    ) -> bool {
        let cols = row.len();
        let first = r * (cols / K) - rows.first_scale;
        let (groups, _) = row.as_chunks_mut::<K>();
        let mut special = false;
        for (g, run) in groups.iter_mut().enumerate() {
            let src = self.bytes(local * cols + g * K, K);
            special |= self.scale_run(src, plan.factors[first + g], plan, limit, run);
        }
        special
    }

    /// `run`'s values (stored in `src`) scaled by `f` as the plan says, clamped to `limit`.
    #[inline(always)]
    fn scale_run(&self, src: &[u8], f: f32, plan: &Plan, limit: f32, run: &mut [f32]) -> bool {
        let bf16_in = self.dtype == DType::BFloat16;
        let round = plan.arithmetic == DType::BFloat16;
        let c = self.canonical_nan;
        // Dividing by a normal power of two is multiplying by its reciprocal, which is exact
        // (2^-127 ..= 2^126): both are the correctly rounded value of the same real number, and
        // a NaN element comes out of either quieted. A multiplication is much the cheaper.
        let (divide, f) = match plan.apply {
            Apply::Divide if normal_power_of_two(f) => (false, 1.0 / f),
            Apply::Divide => (true, f),
            Apply::Multiply => (false, f),
        };
        if self.dtype == DType::Float16 && !f.is_nan() {
            // compressed-tensors' float16 weights: FP8 and MX in float16 arithmetic, NVFP4's
            // float32 quotient.
            let round = plan.arithmetic == DType::Float16;
            return match (divide, round) {
                (true, true) => scale_halves::<true, true>(src, f, limit, run),
                (true, false) => scale_halves::<true, false>(src, f, limit, run),
                (false, true) => scale_halves::<false, true>(src, f, limit, run),
                (false, false) => scale_halves::<false, false>(src, f, limit, run),
            };
        }
        match (f.is_nan(), bf16_in, divide, round) {
            // A NaN factor (rare): `div` / `mul`'s rules one value at a time.
            (true, ..) => {
                let mut special = false;
                for (i, v) in run.iter_mut().enumerate() {
                    let x = self.value(src, i);
                    let y = match plan.apply {
                        Apply::Divide => div(x, f),
                        Apply::Multiply => mul(x, f),
                    };
                    *v = clamp_to(round_in(y, plan.arithmetic), limit);
                    special |= is_special(*v);
                }
                special
            }
            (false, true, true, true) => scale_values::<true, true, true>(src, f, c, limit, run),
            (false, true, true, false) => scale_values::<true, true, false>(src, f, c, limit, run),
            (false, true, false, true) => scale_values::<true, false, true>(src, f, c, limit, run),
            (false, true, false, false) => {
                scale_values::<true, false, false>(src, f, c, limit, run)
            }
            (false, false, true, true) => scale_values::<false, true, true>(src, f, c, limit, run),
            (false, false, true, false) => {
                scale_values::<false, true, false>(src, f, c, limit, run)
            }
            (false, false, false, true) => {
                scale_values::<false, false, true>(src, f, c, limit, run)
            }
            (false, false, false, false) => {
                scale_values::<false, false, false>(src, f, c, limit, run)
            }
        }
    }
}

/// A run of stored values (`BF16` or float32; NaN canonical when `canonical`) divided by or
/// multiplied by its factor `f` (not a NaN: then the hardware's division or product is the rule,
/// x86 returning a NaN element quieted), rounded to bfloat16 when `ROUND`, clamped to `limit`:
/// one loop LLVM vectorises. Says whether it wrote a NaN or -0 ([`is_special`]; the compiler
/// drops that where nobody asks).
#[inline(always)]
fn scale_values<const BF16: bool, const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    canonical: bool,
    limit: f32,
    out: &mut [f32],
) -> bool {
    let scale = |x: f32| {
        let x = if canonical && x.is_nan() {
            DEFAULT_NAN
        } else {
            x
        };
        let y = if DIVIDE { x / f } else { x * f };
        finish(scaled_as_on_x86(y, x), ROUND, limit)
    };
    let mut special = false;
    if BF16 {
        for (v, &b) in out.iter_mut().zip(src.as_chunks::<2>().0) {
            *v = scale(f32::from_bits(u32::from(u16::from_le_bytes(b)) << 16));
            special |= is_special(*v);
        }
    } else {
        for (v, &b) in out.iter_mut().zip(src.as_chunks::<4>().0) {
            *v = scale(f32::from_le_bytes(b));
            special |= is_special(*v);
        }
    }
    special
}

/// [`scale_values`] for float16 elements (compressed-tensors' rules): each quotient or product
/// in float32, rounded to float16 when `ROUND` (torch's float16 arithmetic: a NaN keeps its
/// sign), clamped to `limit`.
#[inline(always)]
fn scale_halves<const DIVIDE: bool, const ROUND: bool>(
    src: &[u8],
    f: f32,
    limit: f32,
    out: &mut [f32],
) -> bool {
    let mut special = false;
    for (v, &b) in out.iter_mut().zip(src.as_chunks::<2>().0) {
        let x = f16_value(u16::from_le_bytes(b));
        let y = scaled_as_on_x86(if DIVIDE { x / f } else { x * f }, x);
        *v = clamp_to(if ROUND { round_f16(y) } else { y }, limit);
        special |= is_special(*v);
    }
    special
}

/// Whether `f` is a positive normal power of two: dividing by it is multiplying by its
/// reciprocal (also a normal power of two), bit for bit.
#[inline(always)]
fn normal_power_of_two(f: f32) -> bool {
    let bits = f.to_bits();
    bits & 0x807F_FFFF == 0 && (1..=254).contains(&(bits >> 23))
}

/// A NaN or -0: where the references' float4 codes differ from the float4 cast's.
#[inline(always)]
fn is_special(v: f32) -> bool {
    v.is_nan() | (v.to_bits() == 0x8000_0000)
}

/// A scaled value rounded to bfloat16 when `round` (torch's arithmetic on bfloat16 tensors:
/// to nearest even, a NaN the default NaN), then clamped to `±limit` (NaN stays).
#[inline(always)]
fn finish(y: f32, round: bool, limit: f32) -> f32 {
    clamp_to(if round { round_bf16(y) } else { y }, limit)
}

/// `y` clamped to `±limit` (NaN stays).
#[inline(always)]
fn clamp_to(y: f32, limit: f32) -> f32 {
    if y > limit {
        limit
    } else if y < -limit {
        -limit
    } else {
        y
    }
}

/// The largest magnitude of the whole tensor, by the sequential rule ([`Input::amax`]): partial
/// maxima of pieces on the thread pool, folded in order.
fn tensor_amax_pass(input: &Input, n: usize) -> f32 {
    let parts: Vec<f32> = (0..n.div_ceil(PIECE_ELEMENTS))
        .into_par_iter()
        .map(|p| {
            let first = p * PIECE_ELEMENTS;
            with_best_isa(
                #[inline(always)]
                || input.amax(first, PIECE_ELEMENTS.min(n - first), 0.0),
            )
        })
        .collect();
    parts.into_iter().fold(0.0, fold_amax)
}

/// Whether `x / f`, rounded to float32 and then to bfloat16, equals `x * (1 / f)` (the
/// reciprocal rounded to float32), rounded the same way, for every bfloat16 `x`: where `f` is a
/// bfloat16 itself and its reciprocal a normal float32. The product is within about one float32
/// ulp (2^-23 relative) of the quotient; the quotient of two 8-bit significands is either a
/// bfloat16 itself (an odd part divides the other) or at least 2^-17 (relative) away from every
/// bfloat16 rounding midpoint — `|2^9 mx - (2n+1) ms| >= 1` over `2^9 ms` — so both round to the
/// same bfloat16 (subnormal quotients likewise, at least 2^-142 from a midpoint against an error
/// near 2^-149). A multiplication instead of a division per element: compressed-tensors' FP8 of
/// bfloat16 weights divides by a bfloat16 scale in bfloat16 arithmetic.
fn reciprocal_serves_bf16(f: f32) -> bool {
    f.to_bits() & 0xFFFF == 0 && (pow2(-126)..=pow2(126)).contains(&f)
}

/// The running amax `a` after a later part's `p`: a NaN already there stays, else `p`'s NaN,
/// else the larger.
pub(crate) fn fold_amax(a: f32, p: f32) -> f32 {
    if a.is_nan() {
        a
    } else if p.is_nan() {
        p
    } else {
        a.max(p)
    }
}

/// compressed-tensors' float4 of a clamped value (`cast_to_fp4`, then `pack_fp4_to_uint8`): the
/// magnitude rounded at its thresholds (ties to even), times `sign(x)`, the sign bit kept. torch's
/// `sign` of ±0 and of NaN is 0, so -0 becomes +0 and a NaN the positive NaN of `abs` (code 0):
/// in float32 and float16 arithmetic every time; on bfloat16 tensors torch's vectorised loops
/// round that NaN to 0xFFFF (code 8), its scalar ones to 0x7FC0 (code 0), and dtcast writes 0.
fn ct_fp4_code(v: f32) -> u8 {
    let a = v.abs();
    let magnitude = if a.is_nan() {
        a
    } else if a <= 0.25 {
        0.0
    } else if a < 0.75 {
        0.5
    } else if a <= 1.25 {
        1.0
    } else if a < 1.75 {
        1.5
    } else if a <= 2.5 {
        2.0
    } else if a < 3.5 {
        3.0
    } else if a <= 5.0 {
        4.0
    } else {
        6.0
    };
    // `x * sign(x)`: sign(±0) and sign(NaN) are +0.
    let sign = if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    };
    let q = mul(magnitude, sign);
    let twice = (cvtt(q * 2.0) as i8).unsigned_abs();
    let index = match twice {
        1..=4 => twice,
        6 => 5,
        8 => 6,
        t if t >= 12 => 7,
        _ => 0,
    };
    index | u8::from(q.is_sign_negative()) << 3
}

/// torchao's `_f32_to_floatx_unpacked` for e2m1: round to nearest even on the float32 bits,
/// saturating at 6; NaN is not handled (its bits go through the normal path, as there).
fn ao_fp4_code(v: f32) -> u8 {
    let sign = ((v.to_bits() & 0x8000_0000) >> 28) as u8;
    let x = f32::from_bits(v.to_bits() & 0x7FFF_FFFF);
    let code = if x >= 6.0 {
        7
    } else if x < 1.0 {
        // Below the smallest normal (1.0): adding 2^21 leaves the code in the low bits, the float
        // addition rounding it to nearest even.
        let denorm_exp: u32 = (127 - 1) + (23 - 1) + 1;
        let magic = f32::from_bits(denorm_exp << 23);
        ((x + magic).to_bits().wrapping_sub(denorm_exp << 23)) as u8
    } else {
        let bits = x.to_bits() as i32;
        let odd = (bits >> 22) & 1;
        let add = ((1 - 127) << 23) + ((1 << 21) - 1);
        (bits.wrapping_add(add).wrapping_add(odd) >> 22) as u8
    };
    code | sign
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::bytes;
    use crate::rules::floor_log2;

    /// `quantize` with the one-pass forms allowed (`fused`) or not.
    fn quantize_with(
        src: &[u8],
        dtype: DType,
        shape: &[usize],
        scheme: &Scheme,
        fused: bool,
    ) -> QuantizedTensor {
        let mut job = Job::new(dtype, shape, scheme).unwrap();
        job.fused = fused;
        let mut elements = vec![0u8; job.element_bytes(job.rows)];
        let mut scales = vec![0u8; job.scale_bytes(0, job.rows)];
        let amax = job.tensor_amax(src);
        let global_scale =
            (job.rows_into(src, 0..job.rows, amax, &mut elements, &mut scales)).unwrap();
        QuantizedTensor {
            elements,
            scales,
            global_scale,
        }
    }

    /// Test inputs of one kind, as float32 values.
    fn values(kind: usize, n: usize, seed: u64) -> Vec<f32> {
        let mut next = crate::xorshift(seed | 1);
        let specials = [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::from_bits(0x0000_8000),
            -f32::from_bits(0x0001_0000),
            f32::MAX,
        ];
        // The float4 grid's ties and neighbours, for groups whose amax is 6 * 2^j.
        let ties = [0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 3.0, 4.0];
        (0..n)
            .map(|i| {
                let r = next();
                let weight = ((r >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1;
                match kind {
                    // Weights as checkpoints hold them.
                    0 => weight,
                    // Every finite bit pattern: groups spanning any range (subnormal products).
                    1 => {
                        let x = f32::from_bits(r as u32);
                        if x.is_finite() {
                            x
                        } else {
                            weight
                        }
                    }
                    // Weights with inf, NaN, zeros and subnormals sprinkled in.
                    2 if r.is_multiple_of(97) => specials[(r >> 8) as usize % specials.len()],
                    2 => weight,
                    // Ties of the float4 grid (times 2^j, with 6 * 2^j once per 16 elements),
                    // nudged by an ulp either way or not at all.
                    3 => {
                        let j = (i / 64 % 40) as i32 - 20;
                        let t = if i % 16 == 0 {
                            6.0
                        } else {
                            ties[(r >> 8) as usize % 10]
                        };
                        let x = t * 2f32.powi(j);
                        let x = match r % 3 {
                            0 => x.next_up(),
                            1 => x.next_down(),
                            _ => x,
                        };
                        if r >> 20 & 1 == 1 {
                            -x
                        } else {
                            x
                        }
                    }
                    // float8_e4m3fn's rounding ties (normal and subnormal, times 2^j, with
                    // 448 * 2^j once per 16 elements), nudged by an ulp either way or not.
                    5 => {
                        let j = (i / 64 % 40) as i32 - 20;
                        let odd = (2 * (r >> 8) % 16 + 1) as f32;
                        let t = if i % 16 == 0 {
                            448.0
                        } else if r & 4 == 0 {
                            (1.0 + odd / 16.0) * 2f32.powi((r >> 16) as i32 % 15 - 6)
                        } else {
                            odd * 2f32.powi(-10)
                        };
                        let x = t * 2f32.powi(j);
                        let x = match r % 3 {
                            0 => x.next_up(),
                            1 => x.next_down(),
                            _ => x,
                        };
                        if r >> 20 & 1 == 1 {
                            -x
                        } else {
                            x
                        }
                    }
                    // bfloat16's smallest magnitudes: subnormals and the lowest normals, both
                    // signs, which MX scales shift up by up to 127 binades.
                    6 => f32::from_bits((r as u32 & 0x807F_FFFF) | (((r >> 32) % 3) as u32) << 23),
                    // Zero groups (signed) among small values.
                    _ if (i / 32) % 3 == 0 => {
                        if r & 1 == 1 {
                            -0.0
                        } else {
                            0.0
                        }
                    }
                    _ => weight * 1e-3,
                }
            })
            .collect()
    }

    /// `plan_finite` gives the general planners' scales and factors for every amax it takes
    /// (every 4099th float32 below its limit, zeros, the largest), both weight dtypes, tensor
    /// amaxes from tiny to huge.
    #[test]
    fn the_finite_plans_are_the_general_ones() {
        let mut amax: Vec<f32> = (0..0x7F60_0000u32)
            .step_by(4099)
            .map(f32::from_bits)
            .collect();
        amax.extend([0.0, f32::from_bits(0x7F5F_FFFF), 6.0, 448.0, 2688.0]);
        for name in ["ct_mxfp4", "ct_mxfp8", "ct_nvfp4"] {
            for w in [DType::BFloat16, DType::Float32] {
                let scheme = Scheme::named(name, w).unwrap();
                let job = Job::new(w, &[1, 32], &scheme).unwrap();
                for tensor in [1e-38f32, 1e-3, 1.0, 448.0, 3e38] {
                    let fast = job.plan_finite(&amax, tensor).unwrap();
                    let mut general_job = Job::new(w, &[1, 32], &scheme).unwrap();
                    general_job.fused = false;
                    let general = general_job.plan(&amax, tensor).unwrap();
                    assert_eq!(
                        fast.scales, general.scales,
                        "{name}, {w}, tensor amax {tensor:e}"
                    );
                    assert_eq!(
                        fast.factors.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
                        general
                            .factors
                            .iter()
                            .map(|f| f.to_bits())
                            .collect::<Vec<_>>(),
                        "{name}, {w}, tensor amax {tensor:e}"
                    );
                    assert_eq!(
                        fast.global.map(f32::to_bits),
                        general.global.map(f32::to_bits)
                    );
                    // Where factors are picked by the scale byte, the byte's is the group's.
                    for (s, f) in fast.scales.iter().zip(&fast.factors) {
                        if let Some(by_byte) = &fast.byte_factors {
                            assert_eq!(by_byte[usize::from(*s)].to_bits(), f.to_bits(), "{name}");
                        }
                    }
                }
            }
        }
        // float16: the finite plans on every finite float16 magnitude (MX: below 1.75 * 2^15,
        // where its power of two is finite in float16; from there on, the general rule).
        let halves: Vec<f32> = (0..0x7C00).map(crate::arith::f16_value).collect();
        let below = |limit: f32| halves.iter().copied().filter(move |&a| a < limit);
        let mx_halves: Vec<f32> = below(57344.0).collect();
        for (name, amax) in [
            ("ct_nvfp4", &halves),
            ("ct_mxfp4", &mx_halves),
            ("ct_mxfp8", &mx_halves),
        ] {
            let scheme = Scheme::named(name, DType::Float16).unwrap();
            let mut general_job = Job::new(DType::Float16, &[1, 32], &scheme).unwrap();
            let job = Job::new(DType::Float16, &[1, 32], &scheme).unwrap();
            general_job.fused = false;
            for tensor in [6e-8f32, 1e-3, 0.04, 1.0, 448.0, 65504.0] {
                let fast = job.plan_finite(amax, tensor).unwrap();
                let general = general_job.plan(amax, tensor).unwrap();
                let at = format!("{name}, tensor amax {tensor:e}");
                // (The first amax where they differ, not the whole lists.)
                let bits = |p: &Plan| p.factors.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                let (fast_bits, general_bits) = (bits(&fast), bits(&general));
                let differ = (0..amax.len()).find(|&i| {
                    fast.scales[i] != general.scales[i] || fast_bits[i] != general_bits[i]
                });
                assert_eq!(
                    differ.map(|i| (amax[i], fast.scales[i], fast.factors[i])),
                    differ.map(|i| (amax[i], general.scales[i], general.factors[i])),
                    "{at}"
                );
                assert_eq!(fast.scales.len(), general.scales.len(), "{at}");
                assert_eq!(
                    fast.global.map(f32::to_bits),
                    general.global.map(f32::to_bits),
                    "{at}"
                );
                for (s, f) in fast.scales.iter().zip(&fast.factors) {
                    if let Some(by_byte) = &fast.byte_factors {
                        assert_eq!(by_byte[usize::from(*s)].to_bits(), f.to_bits(), "{at}");
                    }
                }
            }
            // The first amax whose power of two is inf in float16 is the general rule's.
            let mx = name != "ct_nvfp4";
            assert_eq!(job.plan_finite(&[57344.0], 1.0).is_none(), mx, "{name}");
        }
    }

    /// The one-pass forms (`amax16`, `plan_finite`, `encode4`, `encode8`, `thresholds`) give the
    /// general path's bytes: every scheme they serve, every input dtype its reference takes,
    /// inputs of every kind (weights, any finite value, inf/NaN/zeros/subnormals, the float4 and
    /// float8 grids' ties, bfloat16's smallest magnitudes, zero groups), shapes with an odd
    /// number of groups of 16 per band, partial blocks, several bands.
    #[test]
    fn the_one_pass_forms_give_the_general_paths_bytes() {
        let schemes = [
            "ct_mxfp4",
            "ct_nvfp4",
            "ct_mxfp8",
            "ao_mxfp4_floor",
            "ao_mxfp4_ceil",
            "ao_mxfp4_even",
            "ao_mxfp4_rceil",
            "ao_nvfp4_two_level",
            "ao_nvfp4_single_level",
            "gpt_oss_mxfp4",
            "ct_fp8_tensor",
            "ct_fp8_channel",
            "ct_fp8_block",
            "deepseek_v3_fp8_block",
            "ao_mxfp8_floor",
            "ao_mxfp8_rceil",
        ];
        for name in schemes {
            for dtype in [DType::BFloat16, DType::Float32, DType::Float16] {
                let Ok(scheme) = Scheme::named(name, dtype) else {
                    continue;
                };
                if scheme.check_input(dtype).is_err() {
                    // (float16 weights: compressed-tensors' schemes only.)
                    continue;
                }
                for kind in 0..7 {
                    for shape in [[3, 32], [1, 16 * 33], [4099, 96], [37, 4096], [130, 200]] {
                        let group = match scheme.granularity {
                            Granularity::Group(k) => k,
                            _ => 1,
                        };
                        if shape[1] % group != 0 {
                            continue;
                        }
                        let n = shape[0] * shape[1];
                        let x = values(kind, n, (kind * 7919 + n) as u64);
                        let src = if dtype != DType::Float32 {
                            let wide: &[u8] = bytemuck::cast_slice(&x);
                            let mut b = vec![0u8; n * 2];
                            cast(wide, DType::Float32, &mut b, dtype, CastMode::Torch).unwrap();
                            b
                        } else {
                            bytes(&x)
                        };
                        let fused = quantize_with(&src, dtype, &shape, &scheme, true);
                        let general = quantize_with(&src, dtype, &shape, &scheme, false);
                        let at = (fused.elements.iter().zip(&general.elements))
                            .position(|(a, b)| a != b);
                        assert!(
                            at.is_none(),
                            "{name}, {dtype}, kind {kind}, {shape:?}: element byte {at:?}: {:#x} vs {:#x}",
                            fused.elements[at.unwrap_or(0)],
                            general.elements[at.unwrap_or(0)]
                        );
                        assert_eq!(
                            fused.scales, general.scales,
                            "{name}, {dtype}, kind {kind}, {shape:?}"
                        );
                        assert_eq!(
                            fused.global_scale.map(f32::to_bits),
                            general.global_scale.map(f32::to_bits),
                            "{name}, {dtype}, kind {kind}, {shape:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_row_of_blocks_has_the_sequential_rules_amax() {
        // bfloat16 rows in 2-D blocks: the columns' maxima, then each block's, against the
        // sequential rule run by run (`Input::band_amax`), bit for bit — NaNs of both signs and
        // several payloads at scattered rows and columns (the first NaN in row-major order wins,
        // not the largest), infinities, and a last block narrower than the others.
        let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15);
        for name in ["ct_fp8_block", "deepseek_v3_fp8_block"] {
            let scheme = Scheme::named(name, DType::BFloat16).unwrap();
            for trial in 0..24 {
                let (rows, cols) = (256, 128 * 3 + 72);
                let mut x: Vec<u16> = (0..rows * cols).map(|_| next() as u16 & 0xBF7F).collect();
                // A few specials in some trials: NaN payloads, signs, infinities.
                for _ in 0..trial % 6 {
                    let at = next() as usize % x.len();
                    x[at] = [0x7FC1, 0xFFC2, 0x7F81, 0xFFFF, 0x7F80, 0xFF80][next() as usize % 6];
                }
                let src: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
                let mut job = Job::new(DType::BFloat16, &[rows, cols], &scheme).unwrap();
                let input = Input::new(&src, DType::BFloat16, &scheme);
                for first in [0, 128] {
                    let at = Rows {
                        local: first,
                        first_row: 0,
                        first_scale: scheme.scale_range(0, first, cols).len(),
                        next: None,
                    };
                    let blocks = scheme.scale_range(first, first + 128, cols).len();
                    let (mut fused, mut general) = (vec![0f32; blocks], vec![0f32; blocks]);
                    job.fused = true;
                    job.band_amax(&input, first..first + 128, &at, None, &mut fused);
                    job.fused = false;
                    job.band_amax(&input, first..first + 128, &at, None, &mut general);
                    assert_eq!(
                        fused.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        general.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{name}, trial {trial}, rows from {first}"
                    );
                }
            }
        }
    }

    /// `reciprocal_serves_bf16`'s claim: for every finite bfloat16 `x` (both signs, subnormals)
    /// and bfloat16 factors of every significand at exponents across the range it accepts,
    /// `x / f` and `x * (1 / f)` round to the same bfloat16; and it refuses what is not a
    /// bfloat16 or has no normal reciprocal.
    #[test]
    fn a_bfloat16_quotient_is_the_product_by_the_reciprocal() {
        let round = |y: f32| {
            let b = y.to_bits();
            b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16
        };
        for e in [-126i32, -100, -40, -7, -1, 0, 1, 8, 40, 100, 125] {
            for m in 0..128u32 {
                let f = f32::from_bits(((e + 127) as u32) << 23 | m << 16);
                assert!(reciprocal_serves_bf16(f), "{f:e}");
                let r = 1.0 / f;
                for x in (0..=0xFFFFu32).filter(|b| b & 0x7F80 != 0x7F80) {
                    let x = f32::from_bits(x << 16);
                    assert_eq!(round(x / f), round(x * r), "{x:e} / {f:e}");
                }
            }
        }
        for f in [
            1.0f32 + 1.0 / 256.0,
            pow2(-127),
            pow2(127),
            0.0,
            -1.0,
            f32::INFINITY,
        ] {
            assert!(!reciprocal_serves_bf16(f), "{f:e}");
        }
    }

    /// Float32 values across the whole range: every 4099th bit pattern (both signs, subnormals,
    /// inf, NaN payloads), and the bfloat16 rounding ties around a few values.
    fn sweep() -> Vec<f32> {
        let mut values: Vec<f32> = (0..=u32::MAX).step_by(4099).map(f32::from_bits).collect();
        for base in [1.0f32, -3.0, 448.0, 6.0e-39, f32::MAX] {
            let b = base.to_bits();
            values.extend([b + 0x7FFF, b + 0x8000, b + 0x8001, b + 0x1_8000].map(f32::from_bits));
        }
        values
    }

    /// The element loop's bfloat16 rounding is torch's cast to bfloat16 and back (dtcast_cast's
    /// Torch mode), a NaN the default NaN: on the sweep, bit for bit.
    #[test]
    fn round_bf16_is_the_cast_to_bfloat16_and_back() {
        let values = sweep();
        let mut narrow = vec![0u8; values.len() * 2];
        cast(
            bytemuck::cast_slice(&values),
            DType::Float32,
            &mut narrow,
            DType::BFloat16,
            CastMode::Torch,
        )
        .unwrap();
        for (v, b) in values.iter().zip(narrow.chunks_exact(2)) {
            let back = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
            let want = if back.is_nan() { DEFAULT_NAN } else { back };
            assert_eq!(
                round_bf16(*v).to_bits(),
                want.to_bits(),
                "{v:e} ({:#x})",
                v.to_bits()
            );
        }
    }

    /// The element loop divides by a normal power of two as a product with its reciprocal:
    /// the same bits as the division (on the sweep, for every normal power of two).
    #[test]
    fn dividing_by_a_power_of_two_is_multiplying_by_its_reciprocal() {
        let values: Vec<f32> = sweep().into_iter().step_by(61).collect();
        for e in 1..=254u32 {
            let f = f32::from_bits(e << 23);
            let r = 1.0 / f;
            for &x in &values {
                let (q, p) = (std::hint::black_box(x) / f, std::hint::black_box(x) * r);
                assert_eq!(q.to_bits(), p.to_bits(), "{x:e} / 2^{}", e as i32 - 127);
            }
        }
    }

    /// The element pass encodes float4 with dtcast_cast's SIMD cast and keeps the references'
    /// own code functions for NaN and -0 only: on every other clamped value (every 4096th float32
    /// of magnitude at most 6, and each tie of the float4 grid with its neighbours) the cast must
    /// give both references' codes.
    #[test]
    fn the_float4_cast_gives_both_references_codes_on_clamped_values() {
        let mut values: Vec<f32> = (0..1u32 << 20)
            .map(|i| f32::from_bits(i << 12 | 0x800))
            .filter(|v| v.abs() <= 6.0)
            .collect();
        for k in -24..=24 {
            let tie = k as f32 * 0.25;
            values.extend([tie, tie.next_up(), tie.next_down()]);
        }
        values.retain(|v| !v.is_nan() && v.to_bits() != 0x8000_0000 && v.abs() <= 6.0);
        if values.len() % 2 == 1 {
            values.pop();
        }
        let mut codes = vec![0u8; values.len() / 2];
        cast(
            bytemuck::cast_slice(&values),
            DType::Float32,
            &mut codes,
            DType::Float4E2M1Fn,
            CastMode::Torch,
        )
        .unwrap();
        for (i, &v) in values.iter().enumerate() {
            let got = codes[i / 2] >> (4 * (i % 2)) & 0xF;
            assert_eq!(
                got,
                ct_fp4_code(v),
                "compressed-tensors, {v:e} ({:#x})",
                v.to_bits()
            );
            assert_eq!(got, ao_fp4_code(v), "torchao, {v:e} ({:#x})", v.to_bits());
        }
    }

    /// `floor_log2` is libm's `log2().floor()` on every positive normal power of two (where it
    /// does not call libm) and on the sweep.
    #[test]
    fn floor_log2_is_libms_on_powers_of_two_and_the_rest() {
        let powers = (1..=254u32).map(|e| f32::from_bits(e << 23));
        for x in powers.chain(sweep()) {
            let (got, want) = (floor_log2(x), x.log2().floor());
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{x:e}: {got} vs {want}"
            );
        }
    }
}
