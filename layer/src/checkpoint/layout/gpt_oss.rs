//! gpt-oss's MXFP4 layout: each MoE expert parameter `P` (`*.mlp.experts.gate_up_proj`
//! `[experts, K, R]`, `*.mlp.experts.down_proj`), stored transposed as `P_blocks` uint8
//! `[experts, R, K/32, 16]` (32 float4 codes, low nibble first) and `P_scales` uint8
//! `[experts, R, K/32]` (E8M0); `quantization_config = {"modules_to_not_convert": [...],
//! "quant_method": "mxfp4"}`, as OpenAI's published checkpoints have them. Transformers'
//! `convert_moe_packed_tensors` reads it back transposed to `[experts, K, R]`.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::Scheme;
use serde_json::{json, Value};

use super::api::{Layout, Part, QuantizedWeight, Reader};
use super::shared::{band_rows, err, find, missing, quantize_bands};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::checkpoint::reader::Checkpoint;
use crate::error::LayerError;

/// Elements per E8M0 scale.
const GROUP: usize = 32;
/// The expert parameters gpt-oss stores in MXFP4.
const EXPERT_PARAMS: [&str; 2] = [".mlp.experts.gate_up_proj", ".mlp.experts.down_proj"];

pub(super) struct GptOss;

impl Layout for GptOss {
    fn scheme_name(&self, requested: &str) -> Result<String, String> {
        match requested {
            "mxfp4" | "gpt_oss_mxfp4" => Ok("gpt_oss_mxfp4".to_owned()),
            // --scale-rounding: torchao's rule, stored in gpt-oss's layout.
            r if r.starts_with("ao_mxfp4_") => Ok(r.to_owned()),
            other => Err(format!(
                "--format gpt-oss stores mxfp4 only (float4_e2m1fn with an E8M0 scale per 32 \
                 elements), not {other}"
            )),
        }
    }

    fn targets(&self, e: &Entry) -> bool {
        e.dtype.is_floating_point()
            && e.shape.len() == 3
            && EXPERT_PARAMS.iter().any(|p| e.name.ends_with(p))
    }

    fn targets_described(&self) -> &'static str {
        "3-D MoE expert parameters `*.mlp.experts.gate_up_proj` and `*.mlp.experts.down_proj`, less --ignore"
    }

    fn rows_cols(&self, e: &Entry) -> (usize, usize) {
        (e.shape[0] * e.shape[2], e.shape[1])
    }

    fn parts(&self, e: &Entry, _scheme: &Scheme) -> Vec<Part> {
        let [experts, k, r] = [e.shape[0], e.shape[1], e.shape[2]];
        vec![
            (
                format!("{}_blocks", e.name),
                DType::UInt8,
                vec![experts, r, k / GROUP, GROUP / 2],
            ),
            (
                format!("{}_scales", e.name),
                DType::UInt8,
                vec![experts, r, k / GROUP],
            ),
        ]
    }

    /// Whole experts at a time (about a band's bytes of them, at least one), each expert's
    /// `[K, R]` matrix transposed to `[R, K]` as it is read.
    fn quantize(
        &self,
        ckpt: &Checkpoint,
        e: &Entry,
        scheme: &Scheme,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), LayerError> {
        let [experts, k, r] = [e.shape[0], e.shape[1], e.shape[2]];
        let size = e.dtype.byte_size().unwrap_or(1);
        let matrix = k * r * size;
        let mut stored = Vec::new();
        let read = |first: usize, count: usize, buf: &mut Vec<u8>| {
            // Rows `first..first + count` of `[experts * R, K]`: whole experts.
            let (first, count) = (first / r.max(1), count / r.max(1));
            stored.resize(count * matrix, 0);
            ckpt.read_into(e, first * matrix, &mut stored)?;
            buf.resize(stored.len(), 0);
            for (src, dst) in stored
                .chunks_exact(matrix.max(1))
                .zip(buf.chunks_exact_mut(matrix.max(1)))
            {
                for (i, row) in src.chunks_exact(r * size).enumerate() {
                    for (j, v) in row.chunks_exact(size).enumerate() {
                        let at = (j * k + i) * size;
                        dst[at..at + size].copy_from_slice(v);
                    }
                }
            }
            Ok(())
        };
        let band = band_rows(matrix, 1) * r;
        quantize_bands(e, scheme, [experts * r, k], band, read, out, progress)
    }

    /// What gpt-oss's published config lists as not converted.
    fn config(&self, _requested: &str, _group_size: Option<usize>) -> Value {
        json!({"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                          "model.embed_tokens", "lm_head"],
               "quant_method": "mxfp4"})
    }
}

impl Reader for GptOss {
    fn name(&self) -> &'static str {
        "gpt-oss"
    }

    /// transformers' MXFP4 config: module names or patterns it does not convert.
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["modules_to_not_convert"]
    }

    fn quant_method(&self) -> &'static str {
        "mxfp4"
    }

    /// `P_scales` in uint8 (E8M0 bytes); a floating `*_scales` tensor is some model's own
    /// parameter.
    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        e.name
            .strip_suffix("_scales")
            .filter(|_| e.dtype == DType::UInt8)
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        _config: Option<&Value>,
        _data: super::api::TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        let blocks = format!("{prefix}_blocks");
        let b = find(entries, &blocks).ok_or_else(|| missing(&entries[scales], &blocks))?;
        read_weight(entries, prefix, b, scales).map(Some)
    }
}

/// `P_blocks` uint8 [experts, rows, groups, 16] and `P_scales` uint8 [experts, rows,
/// groups]; the dense `P` is [experts, groups * 32, rows].
fn read_weight(
    entries: &[Entry],
    prefix: &str,
    blocks: usize,
    scales: usize,
) -> Result<QuantizedWeight, LayerError> {
    let (b, s) = (&entries[blocks], &entries[scales]);
    let ok = b.dtype == DType::UInt8
        && s.dtype == DType::UInt8
        && b.shape.len() == 4
        && b.shape[3] == 16
        && s.shape.as_slice() == &b.shape[..3];
    if !ok {
        return Err(err(format!(
            "`{}` ({} {:?}) and `{}` ({} {:?}) are not gpt-oss MXFP4: uint8 [experts, rows, groups, 16] \
             blocks and uint8 [experts, rows, groups] scales",
            quote(&b.name),
            b.dtype,
            b.shape,
            quote(&s.name),
            s.dtype,
            s.shape
        )));
    }
    let (e, r, g) = (b.shape[0], b.shape[1], b.shape[2]);
    let scheme = Scheme::named("gpt_oss_mxfp4", DType::BFloat16).map_err(|e| err(e.to_string()))?;
    Ok(QuantizedWeight {
        name: prefix.to_owned(),
        elements: blocks,
        scales,
        global: None,
        scheme_name: "gpt_oss_mxfp4",
        scheme: super::api::WeightScheme::Scaled(scheme),
        shape: vec![e, r, g * 32],
        dense_shape: vec![e, g * 32, r],
        activation: Vec::new(),
        metadata: Vec::new(),
    })
}
