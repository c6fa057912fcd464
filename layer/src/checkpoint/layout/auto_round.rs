//! AutoRound's own checkpoint format (`quant_method: auto-round`): not a layout of its own but
//! GPTQ's or AutoAWQ's tensors under AutoRound's config, its `packing_format` saying which —
//! `auto_round` and `auto_round:gptqmodel` GPTQ's layout with the zero points as they are
//! (AutoRound's `qlinear_torch`), `auto_round:auto_gptq` (its default, and what it writes for
//! symmetric weights) with them minus one (`qlinear_torch_zp`, AutoGPTQ's v1),
//! `auto_round:auto_awq` AutoAWQ's GEMM layout — and its `extra_config` giving a module bits or
//! a group size of its own.

use dtcast_quant::ZeroPoints;
use serde_json::Value;

use super::shared::err;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

/// The `quant_method` AutoRound writes for its own format.
pub(super) const METHOD: &str = "auto-round";

/// The layout a `packing_format` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Packing {
    /// GPTQ's tensors, zero points as stored or minus one.
    Gptq(ZeroPoints),
    /// AutoAWQ's GEMM tensors.
    Awq,
}

/// The layout `quantization_config` (`q`, AutoRound's) packs its weights in, or why it is not
/// one dtcast reads: integer weights only (`data_type`), of the packings above.
pub(super) fn packing(q: Option<&Value>) -> Result<Packing, LayerError> {
    let text = |key: &str| q.and_then(|q| q.get(key)).and_then(Value::as_str);
    if let Some(t) = text("data_type").filter(|t| !t.starts_with("int")) {
        return Err(err(format!(
            "config.json's quantization_config has AutoRound's `data_type`: {}; dtcast reads its \
             integer weights (`int`)",
            quote(t)
        )));
    }
    let format = text("packing_format").unwrap_or("auto_round:auto_gptq");
    match format {
        "auto_round" | "auto_round:gptqmodel" => Ok(Packing::Gptq(ZeroPoints::Stored)),
        "auto_round:auto_gptq" | "auto_round:gptq" => Ok(Packing::Gptq(ZeroPoints::StoredMinusOne)),
        "auto_round:auto_awq" | "auto_round:awq" => Ok(Packing::Awq),
        other => Err(err(format!(
            "config.json's quantization_config has AutoRound's `packing_format`: {}; dtcast reads \
             auto_round, auto_round:gptqmodel, auto_round:auto_gptq and auto_round:auto_awq",
            quote(other)
        ))),
    }
}

/// AutoRound's settings of its own for module `prefix` (`extra_config`), where it has them.
pub(super) fn module_config<'a>(q: Option<&'a Value>, prefix: &str) -> Option<&'a Value> {
    q?.get("extra_config")?.get(prefix)
}
