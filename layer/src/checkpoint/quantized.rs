//! Quantized weights in a checkpoint: which tensors hold a scaled low-precision weight and its
//! scales, in the layouts compressed-tensors, DeepSeek-V3 and gpt-oss write. Detected from the
//! tensors' names, dtypes and shapes, cross-checked with `config.json`'s `quantization_config`
//! when there is one; anything ambiguous or inconsistent is an error, never a guess — reading a
//! quantized weight without its scale gives values that look fine and are wrong.

use dtcast_dtype::DType;
use dtcast_quant::Scheme;
use serde_json::Value;

use super::header::Entry;
use super::json::quote;
use crate::error::LayerError;

/// One quantized weight: the tensors it is stored in and how to read them.
#[derive(Clone, Debug)]
pub struct QuantizedWeight {
    /// The dense tensor's name (`….weight`; gpt-oss: the parameter name without `_blocks`).
    pub name: String,
    /// The entry holding the elements.
    pub elements: usize,
    /// The entry holding the scales.
    pub scales: usize,
    /// The entry holding the global scale, if the scheme has one.
    pub global: Option<usize>,
    /// The reference scheme (`ct_fp8_block`, `gpt_oss_mxfp4`, ...).
    pub scheme_name: &'static str,
    /// How the elements and scales are read.
    pub scheme: Scheme,
    /// The logical shape `dtcast_quant::dequantize` takes.
    pub shape: Vec<usize>,
    /// The dense tensor's shape (gpt-oss: transposed).
    pub dense_shape: Vec<usize>,
}

impl QuantizedWeight {
    /// The name each entry of a file gets in a conversion: the dense name for a quantized weight's
    /// elements, none for its scales, its own for everything else.
    pub fn output_names(entries: &[Entry], weights: &[QuantizedWeight]) -> Vec<Option<String>> {
        let mut names: Vec<Option<String>> = entries.iter().map(|e| Some(e.name.clone())).collect();
        for w in weights {
            for p in w.parts() {
                names[p] = None;
            }
            names[w.elements] = Some(w.name.clone());
        }
        names
    }

    /// Every entry this weight is stored in.
    pub fn parts(&self) -> impl Iterator<Item = usize> + '_ {
        [self.elements, self.scales].into_iter().chain(self.global)
    }
}

/// The checkpoint family `config.json` names, if any.
pub(crate) fn config_method(config: Option<&Value>) -> Option<String> {
    let q = config?.get("quantization_config")?;
    q.get("quant_method")?.as_str().map(str::to_owned)
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

fn err(message: String) -> LayerError {
    LayerError::Quantized(message)
}

/// The quantized weights among `entries` (a whole checkpoint), in the order of their element
/// tensors. A `config.json` that says the checkpoint is quantized when none is found is an error.
pub fn detect(
    entries: &[Entry],
    config: Option<&Value>,
) -> Result<Vec<QuantizedWeight>, LayerError> {
    let found = detect_part(entries, config)?;
    if let (Some(m), true) = (config_method(config), found.is_empty()) {
        return Err(err(format!(
            "config.json's quantization_config says `{m}`, but no quantized weight (with its scales) \
             is in this file"
        )));
    }
    Ok(found)
}

/// [`detect`] for one shard of a checkpoint, which may hold no quantized weight at all.
pub(crate) fn detect_part(
    entries: &[Entry],
    config: Option<&Value>,
) -> Result<Vec<QuantizedWeight>, LayerError> {
    let find = |name: &str| entries.iter().position(|e| e.name == name);
    let method = config_method(config);
    let mut found: Vec<QuantizedWeight> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let (prefix, family) = if let Some(p) = e.name.strip_suffix(".weight_scale_inv") {
            (p, "deepseek")
        } else if let Some(p) = e.name.strip_suffix(".weight_scale") {
            (p, "compressed-tensors")
        } else if let Some(p) = e
            .name
            .strip_suffix("_scales")
            .filter(|_| e.dtype == DType::UInt8)
        {
            // gpt-oss's E8M0 bytes; a floating `*_scales` tensor is some model's own parameter.
            (p, "gpt-oss")
        } else {
            continue;
        };
        // A scale beside a weight that is not stored narrow (compressed-tensors' "frozen"
        // state: dense weights that carry their scales along) is not a quantized weight: the
        // weight reads as it is.
        let weight_dtype = find(&format!("{prefix}.weight")).map(|w| entries[w].dtype);
        let packed = find(&format!("{prefix}.weight_packed")).is_some();
        if family != "gpt-oss"
            && !packed
            && weight_dtype.is_some_and(|d| d.bits() > 8 && d.is_floating_point())
        {
            continue;
        }
        let scales = i;
        let missing = |what: &str| {
            err(format!(
                "`{}` has no `{}` beside it in this file: a scale without its weight (a checkpoint \
                 sharded between the two is not supported yet)",
                quote(&e.name),
                quote(what)
            ))
        };
        let weight = match family {
            "gpt-oss" => {
                let blocks = format!("{prefix}_blocks");
                let b = find(&blocks).ok_or_else(|| missing(&blocks))?;
                gpt_oss(entries, prefix, b, scales)?
            }
            "deepseek" => {
                let name = format!("{prefix}.weight");
                let w = find(&name).ok_or_else(|| missing(&name))?;
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
                )?
            }
            _ => ct(entries, prefix, scales, config)?,
        };
        let expected = match family {
            "compressed-tensors" => "compressed-tensors",
            "deepseek" => "fp8",
            _ => "mxfp4",
        };
        if let Some(m) = &method {
            if m != expected {
                return Err(err(format!(
                    "config.json's quantization_config says `{m}`, but `{}` is laid out as {family} \
                     stores its weights; the checkpoint is inconsistent",
                    quote(&e.name)
                )));
            }
        }
        found.push(weight);
    }
    found.sort_by_key(|w| w.elements);
    Ok(found)
}

/// compressed-tensors: `P.weight` (float8) or `P.weight_packed` (float4, two per byte) beside
/// `P.weight_scale` (and `P.weight_global_scale` for NVFP4).
fn ct(
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
            (DType::UInt8, None) => ("ct_mxfp4", None),
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
        w.shape[1] *= 2;
        w.dense_shape[1] *= 2;
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

fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape {
        [rows, cols] => (*rows, *cols),
        _ => (0, 0),
    }
}

/// A 2-D weight whose elements entry must be float8_e4m3fn (or packed uint8, checked by the
/// caller).
fn two_d(
    entries: &[Entry],
    name: String,
    elements: usize,
    scales: usize,
    global: Option<usize>,
    scheme_name: &'static str,
    scheme: Scheme,
) -> Result<QuantizedWeight, LayerError> {
    let e = &entries[elements];
    if e.shape.len() != 2 {
        return Err(err(format!(
            "`{}` has shape {:?}; quantized weights are 2-D",
            quote(&e.name),
            e.shape
        )));
    }
    if scheme.element == DType::Float8E4M3Fn && e.dtype != DType::Float8E4M3Fn {
        return Err(err(format!(
            "`{}` is {}, but its scales say float8_e4m3fn elements",
            quote(&e.name),
            e.dtype
        )));
    }
    let q = QuantizedWeight {
        name,
        elements,
        scales,
        global,
        scheme_name,
        scheme,
        shape: e.shape.clone(),
        dense_shape: e.shape.clone(),
    };
    if scheme.element == DType::Float8E4M3Fn {
        check_scales(entries, &q)?;
    }
    Ok(q)
}

/// gpt-oss: `P_blocks` uint8 [experts, rows, groups, 16] and `P_scales` uint8 [experts, rows,
/// groups]; the dense `P` is [experts, groups * 32, rows].
fn gpt_oss(
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
        scheme,
        shape: vec![e, r, g * 32],
        dense_shape: vec![e, g * 32, r],
    })
}

/// The scale (and global scale) tensors hold what the scheme needs for the weight's shape.
fn check_scales(entries: &[Entry], q: &QuantizedWeight) -> Result<(), LayerError> {
    let (rows, cols) = rows_cols(&q.shape);
    let count = q
        .scheme
        .scale_count(rows, cols)
        .map_err(|e| err(format!("`{}`: {e}", quote(&q.name))))?;
    let s = &entries[q.scales];
    if s.numel() != count {
        return Err(err(format!(
            "`{}` holds {} scales; a [{rows}, {cols}] {} weight needs {count}",
            quote(&s.name),
            s.numel(),
            q.scheme_name
        )));
    }
    if let Some(g) = q.global {
        let g = &entries[g];
        if g.dtype != DType::Float32 || g.numel() != 1 {
            return Err(err(format!(
                "`{}` is {} with {} elements; a global scale is one float32",
                quote(&g.name),
                g.dtype,
                g.numel()
            )));
        }
    }
    Ok(())
}
