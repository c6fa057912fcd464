//! `convert --quantize`: the linear weights of a checkpoint quantized with a scaled scheme and
//! written in compressed-tensors' layout (what vLLM loads): `P.weight` + `P.weight_scale` for FP8
//! and MXFP8, `P.weight_packed` + `P.weight_scale` (+ `P.weight_global_scale`) for MXFP4 and
//! NVFP4; E8M0 scales as uint8. The other tensors are copied as they are.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::{quantize, Scheme};

use super::convert::{Quantize, Summary};
use super::header::{self, Entry};
use super::json::quote;
use super::reader::Checkpoint;
use crate::error::LayerError;
use crate::output::AtomicFile;

/// The `--quantize` schemes and the reference scheme each stands for (compressed-tensors').
pub const SCHEMES: [(&str, &str); 6] = [
    ("fp8-tensor", "ct_fp8_tensor"),
    ("fp8-channel", "ct_fp8_channel"),
    ("fp8-block", "ct_fp8_block"),
    ("mxfp8", "ct_mxfp8"),
    ("mxfp4", "ct_mxfp4"),
    ("nvfp4", "ct_nvfp4"),
];

/// The reference scheme a `--quantize` name stands for (a reference's own name stands for itself).
pub fn scheme_name(name: &str) -> &str {
    SCHEMES
        .iter()
        .find(|(cli, _)| *cli == name)
        .map_or(name, |(_, reference)| reference)
}

/// Whether compressed-tensors' default targets include `e`: a 2-D floating `*.weight` that is
/// not an embedding or the output head.
fn is_linear_weight(e: &Entry) -> bool {
    let name = e.name.as_str();
    e.dtype.is_floating_point()
        && e.shape.len() == 2
        && name.ends_with(".weight")
        && !name.contains("embed")
        && !name.starts_with("lm_head")
        && !name.contains(".lm_head")
}

/// The tensors one quantized weight becomes: (name, dtype, shape) in the order their bytes follow
/// each other.
fn outputs(e: &Entry, scheme: &Scheme) -> Vec<(String, DType, Vec<usize>)> {
    let prefix = e.name.strip_suffix(".weight").unwrap_or(&e.name);
    let (rows, cols) = (e.shape[0], e.shape[1]);
    let scale_shape = match scheme.granularity {
        dtcast_quant::Granularity::Tensor => vec![1],
        dtcast_quant::Granularity::Channel => vec![rows, 1],
        dtcast_quant::Granularity::Group(k) => vec![rows, cols / k],
        dtcast_quant::Granularity::Block(br, bc) => vec![rows.div_ceil(br), cols.div_ceil(bc)],
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
        vec![(e.name.clone(), scheme.element, e.shape.clone())]
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

/// Writes `ckpt` with its linear weights quantized into `out`.
pub(crate) fn write_quantized(
    ckpt: &Checkpoint,
    q: &Quantize,
    out: &mut AtomicFile,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Summary, LayerError> {
    let entries = ckpt.entries();
    let reference = scheme_name(&q.scheme);
    let mut ignore = Vec::with_capacity(q.ignore.len());
    for g in &q.ignore {
        let p = glob::Pattern::new(g).map_err(|e| {
            LayerError::Output(format!("--ignore `{g}` is not a valid glob pattern: {e}"))
        })?;
        if !entries.iter().any(|e| p.matches(&e.name)) {
            return Err(LayerError::Output(format!(
                "--ignore `{g}` matches no tensor of the checkpoint"
            )));
        }
        ignore.push(p);
    }
    // Each tensor: its scheme if it is quantized. Everything is checked before anything is
    // written.
    let mut plan: Vec<Option<Scheme>> = Vec::with_capacity(entries.len());
    for e in entries {
        if !is_linear_weight(e) || ignore.iter().any(|p| p.matches(&e.name)) {
            plan.push(None);
            continue;
        }
        let bad = |reason: String| {
            LayerError::Quantized(format!(
                "`{}`: {reason}; leave it unquantized with --ignore {}",
                quote(&e.name),
                quote(&e.name)
            ))
        };
        if !matches!(e.dtype, DType::Float32 | DType::BFloat16) {
            return Err(bad(format!(
                "it is {}, and quantizing reads float32 or bfloat16 weights (as the references do)",
                e.dtype
            )));
        }
        let scheme = Scheme::named(reference, e.dtype).map_err(|err| {
            LayerError::Quantized(format!(
                "--quantize `{}`: {err} (or fp8-tensor, fp8-channel, fp8-block, mxfp8, mxfp4, nvfp4)",
                q.scheme
            ))
        })?;
        scheme
            .scale_count(e.shape[0], e.shape[1])
            .map_err(|err| bad(err.to_string()))?;
        if scheme.element.is_packed() && e.shape[1] % 2 != 0 {
            return Err(bad(format!(
                "{} columns do not pack two per byte",
                e.shape[1]
            )));
        }
        plan.push(Some(scheme));
    }
    let mut specs = Vec::new();
    let mut summary = Summary::default();
    for (e, scheme) in entries.iter().zip(&plan) {
        summary.bytes_before += e.range.len() as u64;
        match scheme {
            Some(s) => {
                let parts = outputs(e, s);
                for (name, dtype, shape) in &parts {
                    let n: usize = shape.iter().product();
                    summary.bytes_after += dtype.storage_bytes(n).unwrap_or(0) as u64;
                    specs.push((name.clone(), *dtype, shape.clone()));
                }
                summary.converted += 1;
            }
            None => {
                summary.kept += 1;
                summary.bytes_after += e.range.len() as u64;
                specs.push((e.name.clone(), e.dtype, e.shape.clone()));
            }
        }
    }
    let head = header::build(&specs, ckpt.metadata())?;
    out.write_all(&(head.len() as u64).to_le_bytes())?;
    out.write_all(&head)?;
    // One tensor at a time: a weight is quantized whole.
    let mut done = 0u64;
    for (e, scheme) in entries.iter().zip(&plan) {
        let bytes = ckpt.read(e)?;
        match scheme {
            Some(s) => {
                let q = quantize(&bytes, e.dtype, &e.shape, s)
                    .map_err(|err| LayerError::Quantized(format!("`{}`: {err}", quote(&e.name))))?;
                out.write_all(&q.elements)?;
                out.write_all(&q.scales)?;
                if let Some(g) = q.global_scale {
                    out.write_all(&g.to_le_bytes())?;
                }
            }
            None => out.write_all(&bytes)?,
        }
        done += e.range.len() as u64;
        progress(done);
    }
    Ok(summary)
}

/// compressed-tensors' `quantization_config` for a `--quantize` scheme (what its
/// `ModelCompressor.update_config` writes): one config group over the Linear layers, `lm_head`
/// and the `--ignore` weights' modules ignored (a glob as compressed-tensors' `re:` form).
pub(crate) fn compressed_tensors_config(scheme: &str, ignore: &[String]) -> serde_json::Value {
    use serde_json::json;
    let reference = scheme_name(scheme);
    let fp4 = reference.contains("fp4");
    let (format, weights) = if reference.starts_with("ct_fp8_") {
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
    let mut ignored = vec![json!("lm_head")];
    for g in ignore {
        let module = g.strip_suffix(".weight").unwrap_or(g);
        ignored.push(if module.contains(['*', '?', '[']) {
            let re: String = module
                .chars()
                .map(|c| match c {
                    '*' => ".*".to_owned(),
                    '?' => ".".to_owned(),
                    '.' => "\\.".to_owned(),
                    c => c.to_string(),
                })
                .collect();
            json!(format!("re:{re}"))
        } else {
            json!(module)
        });
    }
    json!({
        "config_groups": {"group_0": {"format": format, "input_activations": null,
                                      "output_activations": null, "targets": ["Linear"],
                                      "weights": weights}},
        "format": format,
        "global_compression_ratio": null,
        "ignore": ignored,
        "kv_cache_scheme": null,
        "moe_sparsity_config": null,
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
        "sparsity_config": {},
        "transform_config": {},
        "version": "0.20.0"
    })
}
