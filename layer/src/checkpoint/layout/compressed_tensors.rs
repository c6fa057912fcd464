//! compressed-tensors 0.20 (what vLLM loads): `P.weight` + `P.weight_scale` for FP8 and MXFP8,
//! `P.weight_packed` + `P.weight_scale` (+ `P.weight_global_scale`) for MXFP4, MXFP6 (read only)
//! and NVFP4; E8M0 scales as uint8; `quantization_config` as `ModelCompressor.update_config`
//! writes it.

use dtcast_dtype::DType;
use dtcast_quant::{Granularity, Scheme};
use serde_json::{json, Value};

use super::api::{Layout, Part, QuantizedWeight, Reader};
use super::shared::{
    check_scales, err, is_linear_weight, quantize_matrix, rows_cols, stored_dense, two_d,
};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::checkpoint::reader::Checkpoint;
use crate::error::LayerError;
use std::io::Write;

/// The `--quantize` schemes and the reference scheme each stands for (compressed-tensors').
pub const SCHEMES: [(&str, &str); 11] = [
    ("fp8-tensor", "ct_fp8_tensor"),
    ("fp8-channel", "ct_fp8_channel"),
    ("fp8-block", "ct_fp8_block"),
    ("mxfp8", "ct_mxfp8"),
    ("mxfp4", "ct_mxfp4"),
    ("nvfp4", "ct_nvfp4"),
    ("w4a16", "ct_w4a16"),
    ("w4a16-asym", "ct_w4a16_asym"),
    ("w8a16", "ct_w8a16"),
    ("w2a16", "ct_w2a16"),
    ("w8a16-channel", "ct_w8a16_channel"),
];

/// The reference scheme a `--quantize` name stands for (a reference's own name stands for itself).
pub fn scheme_name(name: &str) -> &str {
    SCHEMES
        .iter()
        .find(|(cli, _)| *cli == name)
        .map_or(name, |(_, reference)| reference)
}

pub(super) struct CompressedTensors;

impl Layout for CompressedTensors {
    fn scheme_name(&self, requested: &str) -> Result<String, String> {
        Ok(scheme_name(requested).to_owned())
    }

    fn targets(&self, e: &Entry) -> bool {
        is_linear_weight(e)
    }

    fn targets_described(&self) -> &'static str {
        "2-D float32, bfloat16 or float16 `*.weight` tensors other than embeddings and `lm_head`, less --ignore"
    }

    fn parts(&self, e: &Entry, scheme: &Scheme) -> Vec<Part> {
        let prefix = e.name.strip_suffix(".weight").unwrap_or(&e.name);
        let (rows, cols) = (e.shape[0], e.shape[1]);
        if let Some((bits, symmetric)) = scheme.integer() {
            return super::compressed_tensors_int::parts(
                prefix,
                [rows, cols],
                scheme,
                bits,
                symmetric,
            );
        }
        let scale_shape = match scheme.granularity {
            Granularity::Tensor => vec![1],
            Granularity::Channel => vec![rows, 1],
            Granularity::Group(k) => vec![rows, cols / k],
            Granularity::Block(br, bc) => vec![rows.div_ceil(br), cols.div_ceil(bc)],
        };
        // E8M0 scales are uint8 in compressed-tensors' files.
        let scale_dtype = if scheme.scale == DType::Float8E8M0Fnu {
            DType::UInt8
        } else {
            scheme.scale
        };
        let mut out = if scheme.element == DType::Float4E2M1Fn {
            vec![(
                format!("{prefix}.weight_packed"),
                DType::UInt8,
                vec![rows, cols / 2],
            )]
        } else {
            vec![(e.name.clone(), scheme.element, e.shape.to_vec())]
        };
        out.push((format!("{prefix}.weight_scale"), scale_dtype, scale_shape));
        if scheme.global_scale {
            out.push((
                format!("{prefix}.weight_global_scale"),
                DType::Float32,
                vec![1],
            ));
        }
        out
    }

    fn quantize(
        &self,
        ckpt: &Checkpoint,
        e: &Entry,
        scheme: &Scheme,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), LayerError> {
        if scheme.integer().is_some() {
            return super::compressed_tensors_int::quantize(ckpt, e, scheme, out, progress);
        }
        quantize_matrix(ckpt, e, self.rows_cols(e), scheme, out, progress)
    }

    /// What compressed-tensors' `ModelCompressor.update_config` writes: one config group over the
    /// Linear layers, `lm_head` ignored (the modules left dense are added to `ignore`).
    fn config(&self, requested: &str, group_size: Option<usize>) -> Value {
        let reference = scheme_name(requested);
        let fp4 = reference.contains("fp4");
        let (format, weights) = if let Some(weights) =
            super::compressed_tensors_int::config_weights_for(reference, group_size)
        {
            ("pack-quantized", weights)
        } else if reference.starts_with("ct_fp8_") {
            let strategy = reference.trim_start_matches("ct_fp8_");
            let mut w = json!({"dynamic": false, "group_size": null, "num_bits": 8,
                               "strategy": strategy, "symmetric": true, "type": "float"});
            if strategy == "block" {
                w["block_structure"] = json!([128, 128]);
            }
            ("naive-quantized", w)
        } else if reference.contains("nvfp4") {
            (
                "nvfp4-pack-quantized",
                json!({"dynamic": false, "group_size": 16, "num_bits": 4,
                       "scale_dtype": "torch.float8_e4m3fn", "strategy": "tensor_group",
                       "symmetric": true, "type": "float"}),
            )
        } else {
            (
                if fp4 {
                    "mxfp4-pack-quantized"
                } else {
                    "mxfp8-quantized"
                },
                json!({"dynamic": false, "group_size": 32, "num_bits": if fp4 { 4 } else { 8 },
                       "scale_dtype": "torch.uint8", "strategy": "group", "symmetric": true,
                       "type": "float"}),
            )
        };
        json!({
            "config_groups": {"group_0": {"format": format, "input_activations": null,
                                          "output_activations": null, "targets": ["Linear"],
                                          "weights": weights}},
            "format": format,
            "global_compression_ratio": null,
            "ignore": ["lm_head"],
            "kv_cache_scheme": null,
            "moe_sparsity_config": null,
            "quant_method": "compressed-tensors",
            "quantization_status": "compressed",
            "sparsity_config": {},
            "transform_config": {},
            "version": "0.20.0"
        })
    }
}

impl Reader for CompressedTensors {
    fn name(&self) -> &'static str {
        "compressed-tensors"
    }

    /// compressed-tensors' `ignore`: module names (or `re:` patterns) no config group applies to.
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["ignore"]
    }

    fn quant_method(&self) -> &'static str {
        "compressed-tensors"
    }

    /// Per-tensor FP8 is also what vLLM's `fp8` method (and AutoFP8, which wrote it) stores:
    /// `weight` float8_e4m3fn and a float32 `weight_scale` multiplier, the same tensors and
    /// arithmetic as compressed-tensors' `ct_fp8_tensor`.
    fn read_under(&self, method: &str, weight: &QuantizedWeight) -> bool {
        method == self.quant_method() || (method == "fp8" && weight.scheme_name == "ct_fp8_tensor")
    }

    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        e.name.strip_suffix(".weight_scale")
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        config: Option<&Value>,
        data: super::api::TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        if stored_dense(entries, prefix) {
            return Ok(None);
        }
        if let Some(w) = super::compressed_tensors_int::read(entries, prefix, scales, config, data)?
        {
            return Ok(Some(w));
        }
        read_weight(entries, prefix, scales, config).map(Some)
    }
}

/// Which MX format a `weight_packed` with uint8 (E8M0) scales is, by its width against its
/// scales' (one per 32 elements): MXFP6 at 24 bytes a scale (four elements in three bytes),
/// otherwise MXFP4 (16: two a byte), whose scale count is then checked.
fn mx_packed(packed: &Entry, scale: &Entry) -> &'static str {
    match (packed.shape.last(), scale.shape.last()) {
        (Some(&b), Some(&s)) if packed.shape.len() == scale.shape.len() && b == 24 * s && s > 0 => {
            "ct_mxfp6"
        }
        _ => "ct_mxfp4",
    }
}

/// `P.weight` (float8) or `P.weight_packed` (float4, two per byte; float6, four in three) beside
/// `P.weight_scale` (and `P.weight_global_scale` for NVFP4).
fn read_weight(
    entries: &[Entry],
    prefix: &str,
    scales: usize,
    config: Option<&Value>,
) -> Result<QuantizedWeight, LayerError> {
    let find = |name: &str| entries.iter().position(|e| e.name == name);
    let scale = &entries[scales];
    let name = format!("{prefix}.weight");
    let packed = format!("{prefix}.weight_packed");
    let global = find(&format!("{prefix}.weight_global_scale"));
    if let Some(p) = find(&packed) {
        let (scheme_name, global) = match (scale.dtype, global) {
            (DType::UInt8, None) => (mx_packed(&entries[p], scale), None),
            (DType::Float8E4M3Fn, Some(g)) => ("ct_nvfp4", Some(g)),
            (dtype, g) => {
                return Err(err(format!(
                    "`{}` is {dtype}{}: neither MXFP4 (uint8 E8M0 scales) nor NVFP4 (float8_e4m3fn \
                     scales with a weight_global_scale)",
                    quote(&scale.name),
                    if g.is_some() { " with a global scale" } else { " without a global scale" }
                )))
            }
        };
        let scheme = Scheme::named(scheme_name, DType::BFloat16).map_err(|e| err(e.to_string()))?;
        let mut w = two_d(entries, name, p, scales, global, scheme_name, scheme)?;
        if entries[p].dtype != DType::UInt8 {
            return Err(err(format!(
                "`{}` is {}, not packed uint8",
                quote(&packed),
                entries[p].dtype
            )));
        }
        // Columns of elements: two a byte (float4), four in three bytes (float6).
        let cols = w.shape[1].saturating_mul(8) / scheme.element.bits();
        w.shape[1] = cols;
        w.dense_shape[1] = cols;
        check_scales(entries, &w)?;
        return Ok(w);
    }
    let w = find(&name).ok_or_else(|| {
        err(format!(
            "`{}` has neither `{}` nor `{}` beside it",
            quote(&scale.name),
            quote(&name),
            quote(&packed)
        ))
    })?;
    let scheme_name = match scale.dtype {
        DType::UInt8 => "ct_mxfp8",
        DType::Float32 | DType::BFloat16 | DType::Float16 => {
            let (rows, cols) = rows_cols(&entries[w].shape);
            let numel = scale.numel();
            let by_shape: Vec<&'static str> = [
                ("ct_fp8_tensor", 1),
                ("ct_fp8_channel", rows),
                ("ct_fp8_block", rows.div_ceil(128) * cols.div_ceil(128)),
            ]
            .into_iter()
            .filter(|&(_, n)| n == numel)
            .map(|(s, _)| s)
            .collect();
            match ct_strategy(config).as_deref() {
                Some(s) => {
                    let named = format!("ct_fp8_{s}");
                    by_shape
                        .iter()
                        .copied()
                        .find(|b| *b == named)
                        .ok_or_else(|| {
                            err(format!(
                                "config.json names the `{s}` strategy, but `{}` holds {numel} scales \
                                 for a [{rows}, {cols}] weight",
                                quote(&scale.name)
                            ))
                        })?
                }
                // Without a config the scale count decides; where several strategies give the
                // same count (one row, or one element) their arithmetic is the same.
                None => *by_shape.first().ok_or_else(|| {
                    err(format!(
                        "`{}` holds {numel} scales, which fits no FP8 strategy for a [{rows}, {cols}] \
                         weight (tensor: 1, channel: {rows}, 128x128 blocks: {})",
                        quote(&scale.name),
                        rows.div_ceil(128) * cols.div_ceil(128)
                    ))
                })?,
            }
        }
        other => {
            return Err(err(format!(
                "`{}` is {other}; compressed-tensors stores float8 scales as float32, bfloat16 or \
                 float16, and MX scales as uint8",
                quote(&scale.name)
            )))
        }
    };
    let scheme = Scheme::named(scheme_name, scale.dtype).map_err(|e| err(e.to_string()))?;
    let q = two_d(entries, name, w, scales, None, scheme_name, scheme)?;
    check_scales(entries, &q)?;
    Ok(q)
}

/// compressed-tensors' FP8 strategy from its config (`tensor`, `channel`, `block`), if named.
fn ct_strategy(config: Option<&Value>) -> Option<String> {
    let groups = config?.get("quantization_config")?.get("config_groups")?;
    let strategies: Vec<&str> = groups
        .as_object()?
        .values()
        .filter_map(|g| g.get("weights")?.get("strategy")?.as_str())
        .collect();
    match strategies.as_slice() {
        [one] => Some((*one).to_owned()),
        _ => None,
    }
}
