//! Quantized weights in a checkpoint: which tensors hold a quantized weight and its scales (and
//! zero points, group index, quant state), in the layouts compressed-tensors, DeepSeek-V3,
//! gpt-oss, ModelOpt, GPTQ, AWQ and bitsandbytes write (`layout/`, one module each). Detected
//! from the tensors' names, dtypes and shapes, cross-checked with `config.json`'s
//! `quantization_config` (or ModelOpt's `hf_quant_config.json`) when there is one; anything
//! ambiguous or inconsistent is an error, never a guess — reading a quantized weight without its
//! scale gives values that look fine and are wrong.

use serde_json::Value;

use super::header::Entry;
use super::json::quote;
pub use super::layout::QuantizedWeight;
use super::layout::{metadata_reader, reader_of_method, TensorData, READERS};
use crate::error::LayerError;

/// NVIDIA ModelOpt's description of its quantization, beside `config.json`. Older ModelOpt
/// exports have no other (`config.json` without a `quantization_config`), and vLLM reads it.
pub(crate) const HF_QUANT_CONFIG: &str = "hf_quant_config.json";

/// Where a `quantization_config` read from [`HF_QUANT_CONFIG`] says so (its key and value), so
/// that messages name the file that said it.
const FROM_KEY: &str = "dtcast_read_from";

/// `config` (`config.json`, parsed) as the checkpoint is read: where it has no
/// `quantization_config` and ModelOpt's [`HF_QUANT_CONFIG`] (`hf`, parsed, from `path`) names a
/// weight quantization (`quantization.quant_algo`: `FP8`, `NVFP4`, ...), the
/// `quantization_config` ModelOpt's newer exports write for it (`quant_method: modelopt`, its
/// `quant_algo`, `ignore`: its `exclude_modules`), so that its FP8 weights dequantize by
/// ModelOpt's arithmetic instead of being read as compressed-tensors' (named alike). A file
/// naming no weight quantization (`quant_algo: null`: only the key-value cache) adds nothing.
pub(crate) fn with_hf_quant_config(
    config: Option<Value>,
    hf: Option<Value>,
    path: &std::path::Path,
) -> Result<Option<Value>, LayerError> {
    let Some(hf) = hf else {
        return Ok(config);
    };
    if config
        .as_ref()
        .and_then(|c| c.get("quantization_config"))
        .is_some()
    {
        return Ok(config);
    }
    let bad = |what: &str| {
        LayerError::Quantized(format!(
            "{} {what}: NVIDIA ModelOpt writes {{\"quantization\": {{\"quant_algo\": ..., \
             \"exclude_modules\": [...]}}}}",
            path.display()
        ))
    };
    let Some(quantization) = hf.get("quantization").and_then(Value::as_object) else {
        return Err(bad("has no `quantization` object"));
    };
    let algo = match quantization.get("quant_algo") {
        None | Some(Value::Null) => return Ok(config),
        Some(Value::String(algo)) => algo.clone(),
        Some(_) => return Err(bad("has a `quant_algo` that is not a string")),
    };
    let mut q = serde_json::Map::new();
    q.insert("quant_method".to_owned(), "modelopt".into());
    q.insert("quant_algo".to_owned(), algo.into());
    if let Some(exclude) = quantization.get("exclude_modules") {
        q.insert("ignore".to_owned(), exclude.clone());
    }
    q.insert(FROM_KEY.to_owned(), HF_QUANT_CONFIG.into());
    let mut config = config.unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    match config.as_object_mut() {
        Some(obj) => {
            obj.insert("quantization_config".to_owned(), Value::Object(q));
        }
        None => {
            return Err(LayerError::Quantized(format!(
                "{} is not a JSON object",
                path.with_file_name("config.json").display()
            )))
        }
    }
    Ok(Some(config))
}

/// The file that gave `config`'s `quantization_config`, as messages name it.
pub(crate) fn config_origin(config: Option<&Value>) -> &'static str {
    let from = (config.and_then(|c| c.get("quantization_config")))
        .and_then(|q| q.get(FROM_KEY))
        .and_then(Value::as_str);
    if from == Some(HF_QUANT_CONFIG) {
        "ModelOpt's hf_quant_config.json (config.json has no quantization_config)"
    } else {
        "config.json's quantization_config"
    }
}

/// The checkpoint family `config.json` names, if any.
pub(crate) fn config_method(config: Option<&Value>) -> Option<String> {
    let q = config?.get("quantization_config")?;
    q.get("quant_method")?.as_str().map(str::to_owned)
}

/// Quantized layouts dtcast does not read, each known by the end of a tensor name only it writes
/// (the rest of the name is the quantized module). Converting one would cast its scales as if
/// they were weights, or copy packed integers under a config that no longer describes them.
const FOREIGN: [(&str, &str); 1] = [(
    ".pre_quant_scale",
    "NVIDIA ModelOpt's AWQ (its weight is quantized against an activation pre-scale)",
)];

/// Where `entries` hold weights of a quantized layout dtcast does not read ([`FOREIGN`]): each
/// such module, with the tensor that shows it and the layout's name.
pub(crate) fn foreign<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
) -> Vec<(&'a str, &'a Entry, &'static str)> {
    (entries.into_iter())
        .filter_map(|e| {
            FOREIGN.iter().find_map(|(end, layout)| {
                e.name.strip_suffix(end).map(|module| (module, e, *layout))
            })
        })
        .collect()
}

/// The modules of `entries` that a quantized layout dtcast does not read holds (ModelOpt's AWQ,
/// known by a tensor name only that layout writes), each with the layout's name. Converting them
/// is refused unless `--keep` leaves them as they are.
///
/// ```
/// # use dtcast_layer::checkpoint::{unread_quantized, Checkpoint};
/// # let dir = std::env::temp_dir().join(format!("dtcast-doc-unread-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let file = dir.join("awq.safetensors");
/// let pre_scale = dtcast_device::Tensor::from_vec(vec![1.5f32; 8], &[8])?;
/// dtcast_layer::checkpoint::save(&file, &[("layers.0.fc.pre_quant_scale".to_owned(), pre_scale)], &[])?;
/// let ck = Checkpoint::open(&file)?;
/// let unread = unread_quantized(ck.entries());
/// assert_eq!(unread[0].0, "layers.0.fc");
/// assert!(unread[0].1.starts_with("NVIDIA ModelOpt's AWQ"));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn unread_quantized(entries: &[Entry]) -> Vec<(&str, &'static str)> {
    (foreign(entries).into_iter())
        .map(|(module, _, layout)| (module, layout))
        .collect()
}

/// The error for quantizing or converting `module`, of a layout dtcast does not read (`what`:
/// why not, and what to do instead).
pub(crate) fn foreign_error(module: &str, shows: &str, layout: &str, what: &str) -> LayerError {
    LayerError::Quantized(format!(
        "`{}` makes `{}` a weight quantized by {layout}, a layout dtcast does not read (it reads \
         {}): {what}",
        quote(shows),
        quote(module),
        layouts_read(),
    ))
}

/// The layouts dtcast reads, by `config.json`'s `quant_method` (sorted by it) and name.
fn layouts_read() -> String {
    let mut known: Vec<String> = (READERS.iter())
        .map(|r| format!("`{}` ({})", r.quant_method(), r.name()))
        .collect();
    // Other tools' methods over these layouts, each with the layouts it may hold.
    let mut others: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in READERS {
        for &m in r.other_methods() {
            match others.iter_mut().find(|(o, _)| *o == m) {
                Some((_, names)) => names.push(r.name()),
                None => others.push((m, vec![r.name()])),
            }
        }
    }
    known.extend(
        others
            .into_iter()
            .map(|(m, names)| format!("`{m}` ({})", names.join(" or "))),
    );
    known.sort();
    known.join(", ")
}

/// The `quant_method` of `config.json`, checked: one the layouts read, or an error naming them.
fn known_method(config: Option<&Value>) -> Result<Option<String>, LayerError> {
    let method = config_method(config);
    match &method {
        Some(m) if reader_of_method(m).is_none() => Err(LayerError::Quantized(format!(
            "{} says `{}`, a quantized layout dtcast does not read (it reads {}): converting \
             would cast its scales as if they were weights",
            config_origin(config),
            quote(m),
            layouts_read()
        ))),
        _ => Ok(method),
    }
}

/// The quantized weights among `entries` (a whole checkpoint), in the order of their element
/// tensors. A `config.json` that says the checkpoint is quantized when none is found is an error.
pub fn detect(
    ckpt: &super::reader::Checkpoint,
    config: Option<&Value>,
) -> Result<Vec<QuantizedWeight>, LayerError> {
    let entries = ckpt.entries();
    let data = metadata_reader(entries, |i, buf| ckpt.read_into(&entries[i], 0, buf));
    let found = detect_part(entries, config, &data)?;
    // (Modules of a layout dtcast does not read are what such a config speaks of: each is an
    // error where converting would change it.)
    if let (Some(m), true) = (
        config_method(config),
        found.is_empty() && foreign(entries).is_empty(),
    ) {
        return Err(LayerError::Quantized(format!(
            "{} says `{m}`, but no quantized weight (with its scales) is in this file",
            config_origin(config)
        )));
    }
    Ok(found)
}

/// [`detect`] for one shard of a checkpoint, which may hold no quantized weight at all.
pub(crate) fn detect_part(
    entries: &[Entry],
    config: Option<&Value>,
    data: TensorData,
) -> Result<Vec<QuantizedWeight>, LayerError> {
    let method = known_method(config)?;
    // (A module of a layout dtcast does not read may hold tensors named as a layout's scales:
    // ModelOpt's AWQ has a `weight_scale`. It is not read as that layout; `foreign` names it.)
    let foreign: std::collections::HashSet<&str> =
        foreign(entries).into_iter().map(|(m, _, _)| m).collect();
    let mut found: Vec<QuantizedWeight> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        // A scale tensor names its layout: the first that claims the weight beside it.
        let mut read = None;
        for layout in READERS {
            let Some(prefix) = layout.scales_of(e) else {
                continue;
            };
            if foreign.contains(prefix) {
                break;
            }
            if let Some(weight) = layout.read(entries, prefix, i, config, data)? {
                read = Some((layout, weight));
                break;
            }
        }
        let Some((layout, weight)) = read else {
            continue;
        };
        if let Some(m) = &method {
            if !layout.read_under(m, &weight) {
                return Err(LayerError::Quantized(format!(
                    "{} says `{m}`, but `{}` is laid out as {} stores its weights; the \
                     checkpoint is inconsistent",
                    config_origin(config),
                    quote(&e.name),
                    layout.name()
                )));
            }
        }
        found.push(weight);
    }
    // Each weight's module's activation quantization parameters go with it.
    if !found.is_empty() {
        let by_name: std::collections::HashMap<&str, usize> = (entries.iter().enumerate())
            .map(|(i, e)| (e.name.as_str(), i))
            .collect();
        for w in &mut found {
            if let Some(module) = w.name.strip_suffix(".weight") {
                w.activation = (super::layout::ACTIVATION_PARAMETERS.iter())
                    .filter_map(|p| by_name.get(format!("{module}.{p}").as_str()).copied())
                    .collect();
            }
        }
    }
    found.sort_by_key(|w| w.elements);
    Ok(found)
}
