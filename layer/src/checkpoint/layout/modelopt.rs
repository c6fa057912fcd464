//! NVIDIA ModelOpt's checkpoints (`export_hf_checkpoint`, what TensorRT-LLM, vLLM and SGLang
//! load; NVIDIA's published FP4 and FP8 models). Per-tensor FP8: `P.weight` float8_e4m3fn and
//! `P.weight_scale` float32 (0-d), an element `weight.to(dtype) * weight_scale.to(dtype)` in the
//! output dtype (`FP8QTensor.dequantize`); known by `config.json` alone, the tensors being named
//! as compressed-tensors' per-tensor FP8. NVFP4: `P.weight` uint8 `[out, in/2]` (two
//! float4_e2m1fn, the low nibble first), `P.weight_scale` float8_e4m3fn `[out, in/16]`,
//! `P.weight_scale_2` float32 (0-d), a multiplier: an element is
//! `e2m1 × (weight_scale × weight_scale_2)` in float32, then the
//! dense dtype (`NVFP4QTensor.dequantize`): torchao's two-level NVFP4 arithmetic, except that
//! code 0x8 reads as +0 (`dtcast_quant::Convention::ModelOpt`).
//! `quantization_config = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": [...]}`
//! (older exports say so in `hf_quant_config.json` only, which `read_config` reads as that).
//! Read, not written.

use dtcast_dtype::DType;
use dtcast_quant::Scheme;
use serde_json::Value;

use super::api::{QuantizedWeight, Reader};
use super::shared::{check_scales, err, find, missing, two_d};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::checkpoint::quantized::config_method;
use crate::error::LayerError;

pub(super) struct ModelOpt;

impl Reader for ModelOpt {
    fn name(&self) -> &'static str {
        "ModelOpt"
    }

    fn quant_method(&self) -> &'static str {
        "modelopt"
    }

    /// `weight_scale`, named as compressed-tensors names its scales: ModelOpt's where a
    /// `weight_scale_2` (which only ModelOpt writes) is beside it, or `config.json` says
    /// `modelopt` ([`READERS`](super::READERS) asks this layout before compressed-tensors).
    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        e.name.strip_suffix(".weight_scale")
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        s: usize,
        config: Option<&Value>,
        _data: super::api::TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        let name = format!("{prefix}.weight");
        let scale_name = format!("{prefix}.weight_scale");
        let global = find(entries, &format!("{prefix}.weight_scale_2"));
        if global.is_none() && config_method(config).as_deref() != Some(self.quant_method()) {
            return Ok(None);
        }
        let w = find(entries, &name).ok_or_else(|| missing(&entries[s], &name))?;
        let Some(global) = global else {
            // Without a `weight_scale_2`: ModelOpt's per-tensor FP8, its config says (the
            // tensors are compressed-tensors' per-tensor FP8's, the arithmetic is not).
            let scale = &entries[s];
            if scale.dtype != DType::Float32 || scale.numel() != 1 {
                return Err(err(format!(
                    "`{}` is {} with {} elements: dtcast reads ModelOpt's FP8 with one float32 \
                     scale per tensor (and its NVFP4), not per channel or block",
                    quote(&scale_name),
                    scale.dtype,
                    scale.numel()
                )));
            }
            let scheme =
                Scheme::named("modelopt_fp8", DType::BFloat16).map_err(|e| err(e.to_string()))?;
            return two_d(entries, name, w, s, None, "modelopt_fp8", scheme).map(Some);
        };
        let (weight, scale) = (&entries[w], &entries[s]);
        if weight.dtype != DType::UInt8 || scale.dtype != DType::Float8E4M3Fn {
            return Err(err(format!(
                "`{}` is {} and `{}` {}: ModelOpt's NVFP4 stores packed uint8 elements with \
                 float8_e4m3fn scales, and dtcast reads no other ModelOpt weight",
                quote(&name),
                weight.dtype,
                quote(&scale_name),
                scale.dtype
            )));
        }
        let scheme =
            Scheme::named("modelopt_nvfp4", DType::BFloat16).map_err(|e| err(e.to_string()))?;
        let mut q = two_d(entries, name, w, s, Some(global), "modelopt_nvfp4", scheme)?;
        q.shape[1] *= 2;
        q.dense_shape[1] *= 2;
        check_scales(entries, &q)?;
        Ok(Some(q))
    }

    /// The config.json ModelOpt writes lists modules left dense under `ignore` (its
    /// `hf_quant_config.json` under `exclude_modules`, which a directory conversion updates).
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["ignore"]
    }
}
