//! One tensor's quantization ([`Job`]): the checks every entry point makes, the sizes of its
//! buffers, and the planning — a band's scale plan from its amaxes, by the reference's rule
//! (`rules.rs`), or in one vectorised loop where every amax is finite. Its bands are scheduled
//! in `bands.rs` and encoded in `encode.rs`.

use super::*;

/// One tensor's quantization: its checked shape and scheme, and what its elements are clamped to.
pub(crate) struct Job<'a> {
    pub(super) dtype: DType,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) scheme: &'a Scheme,
    pub(super) element_max: f32,
    /// Whether the one-pass forms may serve (`amax16`, `encode4`); the tests turn them off to
    /// hold them to the general path.
    pub(super) one_pass: bool,
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
        if let crate::scheme::ScaleRule::MinMax { .. } = scheme.rule {
            return Err(crate::scheme::not_scaled());
        }
        if !scheme.quantizes() {
            let reason = if scheme.element == DType::Float6E2M3Fn {
                "compressed-tensors' MXFP6 (ct_mxfp6) is read, not written: quantize with \
                 ct_mxfp4 or ct_mxfp8"
            } else {
                "ModelOpt's NVFP4 (modelopt_nvfp4) is read, not written: quantize with \
                 ct_nvfp4 (compressed-tensors' rule) or ao_nvfp4_two_level"
            };
            return Err(QuantError::Scheme {
                reason: reason.to_owned(),
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
            one_pass: true,
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
    pub(super) fn input_bytes(&self, rows: usize) -> Result<usize, QuantError> {
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
    pub(super) fn element_bytes(&self, rows: usize) -> usize {
        self.scheme
            .element
            .storage_bytes(rows * self.cols)
            .unwrap_or(0)
    }

    /// The stored bytes of rows `start..end`'s scales.
    pub(super) fn scale_bytes(&self, start: usize, end: usize) -> usize {
        self.scheme.scale_range(start, end, self.cols).len()
            * self.scheme.scale.byte_size().unwrap_or(1)
    }

    /// The whole tensor's amax where a scale depends on it (a per-tensor scale, a global
    /// scale): a first pass over the input, a reduction that reads at memory speed. 0 where
    /// nothing needs it. (It once kept every group's maximum for the bands too: writing those
    /// and reading them back cost more than finding them again from the core's cache.)
    pub(super) fn tensor_amax(&self, src: &[u8]) -> f32 {
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
    pub(super) fn scale_codes(
        &self,
        tensor_amax: f32,
        global: Option<f32>,
        scales: usize,
    ) -> Option<ScaleCodes> {
        let scheme = self.scheme;
        let serves = self.one_pass
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
        if self.one_pass {
            if let Some(plan) = self.plan_finite(amax, tensor_amax) {
                return Ok(plan);
            }
        }
        Ok(match (scheme.convention, scheme.rule) {
            (Convention::CompressedTensors, ScaleRule::AbsMax) if scheme.global_scale => {
                compressed_tensors_nvfp4(amax, tensor_amax, dtype)
            }
            (Convention::CompressedTensors, ScaleRule::AbsMax) => {
                compressed_tensors_fp8(amax, dtype)
            }
            (Convention::CompressedTensors, ScaleRule::PowerOfTwo(_)) => {
                compressed_tensors_mx(amax, dtype, scheme)
            }
            (Convention::TorchAo, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                torchao_mx_rceil(amax, element_max)
            }
            (Convention::TorchAo, ScaleRule::PowerOfTwo(rounding)) => {
                torchao_mx(amax, rounding, scheme)
            }
            (Convention::TorchAo, ScaleRule::AbsMax) => torchao_nvfp4(amax, tensor_amax, scheme),
            (Convention::DeepSeek, ScaleRule::AbsMax) if !scheme.global_scale => {
                compressed_tensors_fp8(amax, DType::Float32)
            }
            (Convention::GptOss, ScaleRule::PowerOfTwo(MxRounding::RCeil)) => {
                torchao_mx_rceil(amax, element_max)
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
    pub(super) fn plan_finite(&self, amax: &[f32], tensor_amax: f32) -> Option<Plan> {
        let scheme = self.scheme;
        // Below this, an amax rounded at float4's mantissa width stays finite: in float32 (and
        // bfloat16) up to 0x7F60_0000; float16's MX rounds its amax to a power of two in float16,
        // which is inf from 1.75 * 2^15 (the general rule's business). (The largest bits by a
        // fold, which LLVM vectorises: `all` stops early, one scale at a time.)
        let limit = match scheme.rule {
            ScaleRule::PowerOfTwo(_) if self.dtype == DType::Float16 => 0x4760_0000,
            ScaleRule::PowerOfTwo(_) | ScaleRule::AbsMax => 0x7F60_0000,
            ScaleRule::MinMax { .. } => return None,
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
                    || compressed_tensors_mx_finite(amax, offset, self.dtype),
                ))
            }
            ScaleRule::AbsMax if scheme.global_scale => {
                let g = compressed_tensors_nvfp4(&[], tensor_amax, self.dtype).global?;
                Some(with_best_isa(
                    #[inline(always)]
                    || compressed_tensors_nvfp4_finite(amax, g, self.dtype),
                ))
            }
            ScaleRule::AbsMax | ScaleRule::MinMax { .. } => None,
        }
    }
}
