//! What another backend needs to run a scheme: the per-code values, per-scale factors and scale
//! plans that the CPU path itself works from, computed here once, so that kernels elsewhere
//! (dtcast-device's CUDA kernels) apply the same numbers element by element and cannot drift from
//! the CPU's bytes.
//!
//! Dequantizing is, for every scheme, `out[i] = round_out(values[code(i)] × factor(scale(i)))`
//! (the product with x86's NaN rules, [`DequantPlan`]); gpt-oss is `ldexp` instead. Quantizing is
//! an amax per scale (the first NaN, else the largest magnitude), then a plan from the amaxes
//! ([`Quantizer::plan`], the references' scale rules), then every element scaled, rounded and
//! encoded by the plan's few rules ([`ScalePlan`]).

use dtcast_dtype::DType;

use crate::dequant::{check_len, rows_cols, DequantPlan, Quantized, Scales};
use crate::quantize::{fold_amax, reads_nan_as_default, Apply, Job};
use crate::scheme::{Convention, Granularity, Scheme};
use crate::QuantError;

impl DequantPlan {
    /// The plan for `q` under `scheme` into `out`, after every check [`dequantize`](crate::dequantize)
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
        crate::dequant::plan(q.elements.len(), q, scheme, out)
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
        crate::dequant::plan_of_parts(element_bytes, shape, scales, global_scale, scheme, out)
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
    /// Whether the scaled value is rounded to bfloat16 (torch's bfloat16 arithmetic: nearest
    /// even, a NaN the default NaN `0x7FC0`) before it is clamped.
    pub round_bf16: bool,
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
    /// The checks [`quantize`](crate::quantize) makes: an input dtype the references quantize
    /// (float32, bfloat16), a valid scheme, a shape it accepts.
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

    /// How many scales the tensor has (the length of the amax slice [`plan`](Quantizer::plan)
    /// takes).
    pub fn scale_count(&self) -> usize {
        let (rows, cols) = self.rows_cols();
        self.job.scheme().scale_count(rows, cols).unwrap_or(0)
    }

    /// The plan from every scale's amax (in the scales' order; each the first NaN among its
    /// elements as the input reads, else their largest magnitude, 0 for none). The whole
    /// tensor's amax, where a global scale needs it, is theirs folded in order.
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
            round_bf16: plan.arithmetic == DType::BFloat16,
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
