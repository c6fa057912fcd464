//! Quantized weights in a checkpoint: which tensors hold a scaled low-precision weight and its
//! scales, in the layouts compressed-tensors, DeepSeek-V3 and gpt-oss write. Detected from the
//! tensors' names, dtypes and shapes, cross-checked with `config.json`'s `quantization_config`
//! when there is one; anything ambiguous or inconsistent is an error, never a guess — reading a
//! quantized weight without its scale gives values that look fine and are wrong.

use serde_json::Value;

use super::header::Entry;
use super::json::quote;
use super::layout::QuantizedFormat;
pub use super::layout::QuantizedWeight;
use crate::error::LayerError;

/// The checkpoint family `config.json` names, if any.
pub(crate) fn config_method(config: Option<&Value>) -> Option<String> {
    let q = config?.get("quantization_config")?;
    q.get("quant_method")?.as_str().map(str::to_owned)
}

/// The quantized weights among `entries` (a whole checkpoint), in the order of their element
/// tensors. A `config.json` that says the checkpoint is quantized when none is found is an error.
pub fn detect(
    entries: &[Entry],
    config: Option<&Value>,
) -> Result<Vec<QuantizedWeight>, LayerError> {
    let found = detect_part(entries, config)?;
    if let (Some(m), true) = (config_method(config), found.is_empty()) {
        return Err(LayerError::Quantized(format!(
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
    let method = config_method(config);
    let mut found: Vec<QuantizedWeight> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        // A scale tensor names its layout (the layouts' scale names do not overlap).
        let Some((format, prefix)) = QuantizedFormat::ALL
            .into_iter()
            .find_map(|f| f.layout().scales_of(e).map(|p| (f, p)))
        else {
            continue;
        };
        let layout = format.layout();
        let Some(weight) = layout.read(entries, prefix, i, config)? else {
            continue;
        };
        if let Some(m) = &method {
            if m != layout.quant_method() {
                return Err(LayerError::Quantized(format!(
                    "config.json's quantization_config says `{m}`, but `{}` is laid out as {format} \
                     stores its weights; the checkpoint is inconsistent",
                    quote(&e.name)
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
