//! What another backend needs to run a scheme: the per-code values, per-scale factors and scale
//! plans that the CPU path itself works from, computed here once, so that kernels elsewhere
//! (dtcast-device's CUDA kernels) apply the same numbers element by element and cannot drift from
//! the CPU's bytes.
//!
//! Dequantizing is, for every scheme, `out[i] = round_out(values[code(i)] × factor(scale(i)))`
//! (the product with x86's NaN rules, [`DequantPlan`](crate::DequantPlan), which lives beside
//! [`Quantized`](crate::Quantized) in `dequant.rs` since the CPU path works from it); gpt-oss is
//! `ldexp` instead. Quantizing is an amax per scale (the first NaN, else the largest magnitude),
//! then a plan from the amaxes ([`Quantizer::plan`], the references' scale rules), then every
//! element scaled, rounded and encoded by the plan's few rules ([`ScalePlan`]).

use dtcast_dtype::DType;

use crate::dequant::{check_len, rows_cols};
use crate::quantize::{amax_nan_is_default, fold_amax, reads_nan_as_default, Job};
use crate::rules::Apply;
use crate::scheme::{Convention, Granularity, Scheme};
use crate::QuantError;

/// How a backend scales and encodes the elements of one tensor, from the amax of each of its
/// scales: the references' scale rules, applied by [`Quantizer::plan`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePlan {
    /// The scales as stored (the scheme's dtype and layout).
    pub scales: Vec<u8>,
    /// The global scale, where the scheme has one.
    pub global_scale: Option<f32>,
    /// Each scale's factor: an element is divided by it where [`divide`](ScalePlan::divide),
    /// else multiplied (x86's NaN rules: a NaN element comes out quieted; a NaN factor, divided
    /// into a number or multiplied, gives itself quieted).
    pub factors: Vec<f32>,
    /// Whether elements are divided by their factor (else multiplied).
    pub divide: bool,
    /// The dtype the scaled value is rounded to before it is clamped, as torch's arithmetic on
    /// tensors of it rounds: `BFloat16` (nearest even, a NaN the default NaN `0x7FC0`),
    /// `Float16` (nearest even, overflow to inf, a NaN keeping its sign and top payload bits), or
    /// `Float32` (not rounded).
    pub arithmetic: DType,
    /// The magnitude scaled values are clamped to (NaN stays; infinity: no clamp).
    pub limit: f32,
    /// Whether the input's NaNs read as the default NaN `0x7FC00000` (compressed-tensors
    /// computes on bfloat16 tensors): in the amax and in the elements.
    pub canonical_nan: bool,
    /// Whether float4's NaN and -0 are encoded by compressed-tensors' rule (`x * sign(x)`: -0
    /// becomes +0, NaN code 0 with its sign) rather than torchao's (the bits of the value through
    /// its rounding formula); every other value by the float4 cast.
    pub compressed_tensors_float4: bool,
}

/// A tensor's quantization, checked: what a backend computes amaxes over, and the scale rules
/// that turn them into a [`ScalePlan`].
///
/// ```
/// use dtcast_dtype::DType;
/// use dtcast_quant::{Quantizer, Scheme};
/// let scheme = Scheme::named("ct_fp8_tensor", DType::Float32)?;
/// let quantizer = Quantizer::new(DType::Float32, &[1, 4], &scheme)?;
/// let plan = quantizer.plan(&[448.0])?;
/// assert_eq!((plan.factors.as_slice(), plan.divide, plan.limit), (&[1.0f32][..], true, 448.0));
/// assert_eq!(plan.scales, 1.0f32.to_le_bytes());
/// # Ok::<(), dtcast_quant::QuantError>(())
/// ```
pub struct Quantizer<'a> {
    job: Job<'a>,
}

impl std::fmt::Debug for Quantizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quantizer")
            .field("dtype", &self.job.dtype())
            .field("rows", &self.job.rows())
            .field("cols", &self.job.cols())
            .field("scheme", self.job.scheme())
            .finish()
    }
}

impl<'a> Quantizer<'a> {
    /// The checks [`quantize`](fn@crate::quantize) makes: an input dtype the scheme's reference
    /// quantizes (float32 and bfloat16, and float16 under compressed-tensors' rules), a valid
    /// scheme, a shape it accepts.
    pub fn new(
        dtype: DType,
        shape: &[usize],
        scheme: &'a Scheme,
    ) -> Result<Quantizer<'a>, QuantError> {
        Ok(Quantizer {
            job: Job::new(dtype, shape, scheme)?,
        })
    }

    /// Rows and columns.
    pub fn rows_cols(&self) -> (usize, usize) {
        (self.job.rows(), self.job.cols())
    }

    /// Whether the reference reads the input's NaNs as the default NaN `0x7FC00000`
    /// (compressed-tensors computes on bfloat16 tensors): in the amax as in the elements.
    pub fn reads_nan_as_default(&self) -> bool {
        reads_nan_as_default(self.job.dtype(), self.job.scheme())
    }

    /// Whether a scale's amax, where its elements hold a NaN, is the default NaN `0x7FC00000`
    /// rather than the first of them as the input reads: where the input's NaNs read as the
    /// default NaN, and for float16 weights (torch's float16 reductions give it for any NaN).
    pub fn amax_nan_is_default(&self) -> bool {
        amax_nan_is_default(self.job.dtype(), self.job.scheme())
    }

    /// How many scales the tensor has (the length of the amax slice [`plan`](Quantizer::plan)
    /// takes).
    pub fn scale_count(&self) -> usize {
        let (rows, cols) = self.rows_cols();
        self.job.scheme().scale_count(rows, cols).unwrap_or(0)
    }

    /// The plan from every scale's amax (in the scales' order; each the first NaN among its
    /// elements as the input reads, or the default NaN where
    /// [`amax_nan_is_default`](Quantizer::amax_nan_is_default), else their largest magnitude, 0
    /// for none). The whole tensor's amax, where a global scale needs it, is theirs folded in
    /// order.
    pub fn plan(&self, amax: &[f32]) -> Result<ScalePlan, QuantError> {
        check_len("amax", self.scale_count() * 4, amax.len() * 4)?;
        let scheme = self.job.scheme();
        let tensor_amax = amax.iter().copied().fold(0.0, fold_amax);
        let plan = self.job.plan(amax, tensor_amax)?;
        let limit = if plan.clamp {
            self.job.element_max()
        } else {
            f32::INFINITY
        };
        Ok(ScalePlan {
            scales: plan.scales,
            global_scale: plan.global,
            factors: plan.factors,
            divide: matches!(plan.apply, Apply::Divide),
            arithmetic: plan.arithmetic,
            limit,
            canonical_nan: self.reads_nan_as_default(),
            compressed_tensors_float4: scheme.convention == Convention::CompressedTensors,
        })
    }
}

/// Rows and columns of a shape, as the scaled formats count them (leading dimensions as rows).
pub fn matrix_shape(shape: &[usize]) -> Result<(usize, usize), QuantError> {
    rows_cols(shape)
}

/// Which of a granularity's numbers a kernel needs to find an element's scale: (kind, k or block
/// rows, block columns), with kind 0 tensor, 1 channel, 2 groups of k, 3 blocks.
pub fn scale_layout(granularity: Granularity) -> (u32, usize, usize) {
    match granularity {
        Granularity::Tensor => (0, 1, 1),
        Granularity::Channel => (1, 1, 1),
        Granularity::Group(k) => (2, k, 1),
        Granularity::Block(br, bc) => (3, br, bc),
    }
}
