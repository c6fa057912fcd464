//! DeepSeek-V3's native FP8 layout: `P.weight` float8_e4m3fn `[out, in]` and
//! `P.weight_scale_inv` float32 `[ceil(out/128), ceil(in/128)]` (a multiplier despite its name);
//! `quantization_config = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
//! "weight_block_size": [128, 128]}`, as DeepSeek-V3's published checkpoints have them.

use dtcast_dtype::DType;
use dtcast_quant::Scheme;
use serde_json::{json, Value};

use super::api::{Layout, Part, QuantizedWeight, Reader};
use super::shared::{err, find, is_linear_weight, missing, stored_dense, two_d};
use crate::checkpoint::header::Entry;
use crate::error::LayerError;

/// DeepSeek-V3's block: 128 × 128 elements share a scale.
const BLOCK: usize = 128;

pub(super) struct DeepSeek;

impl Layout for DeepSeek {
    fn scheme_name(&self, requested: &str) -> Result<String, String> {
        match requested {
            "fp8-block" | "deepseek_v3_fp8_block" => Ok("deepseek_v3_fp8_block".to_owned()),
            other => Err(format!(
                "--format deepseek stores fp8-block only (DeepSeek-V3's float8_e4m3fn with a \
                 float32 scale per 128x128 block), not {other}"
            )),
        }
    }

    /// The linear weights, less the MoE router (`*.mlp.gate.weight`), which DeepSeek-V3 keeps in
    /// bfloat16 (it is not a Linear layer).
    fn targets(&self, e: &Entry) -> bool {
        is_linear_weight(e) && !e.name.ends_with(".mlp.gate.weight")
    }

    fn targets_described(&self) -> &'static str {
        "2-D float32 or bfloat16 `*.weight` tensors other than embeddings, `lm_head` and the MoE router `*.mlp.gate.weight`, less --ignore"
    }

    fn parts(&self, e: &Entry, _scheme: &Scheme) -> Vec<Part> {
        let prefix = e.name.strip_suffix(".weight").unwrap_or(&e.name);
        let blocks = vec![e.shape[0].div_ceil(BLOCK), e.shape[1].div_ceil(BLOCK)];
        vec![
            (e.name.clone(), DType::Float8E4M3Fn, e.shape.to_vec()),
            (format!("{prefix}.weight_scale_inv"), DType::Float32, blocks),
        ]
    }

    fn config(&self, _requested: &str, _group_size: Option<usize>) -> Value {
        json!({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
               "weight_block_size": [BLOCK, BLOCK]})
    }
}

impl Reader for DeepSeek {
    fn name(&self) -> &'static str {
        "deepseek"
    }

    /// transformers' FP8 config reads `modules_to_not_convert`, vLLM's `ignored_layers`; both
    /// take module names.
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["modules_to_not_convert", "ignored_layers"]
    }

    fn quant_method(&self) -> &'static str {
        "fp8"
    }

    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        e.name.strip_suffix(".weight_scale_inv")
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        _config: Option<&Value>,
        _data: super::api::TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        if stored_dense(entries, prefix) {
            return Ok(None);
        }
        let name = format!("{prefix}.weight");
        let w = find(entries, &name).ok_or_else(|| missing(&entries[scales], &name))?;
        let scheme = Scheme::named("deepseek_v3_fp8_block", DType::Float32)
            .map_err(|e| err(e.to_string()))?;
        two_d(
            entries,
            name,
            w,
            scales,
            None,
            "deepseek_v3_fp8_block",
            scheme,
        )
        .map(Some)
    }
}
