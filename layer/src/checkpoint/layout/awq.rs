//! AutoAWQ's layouts. GEMM (the default): `P.qweight` int32 `[in, out/8]` (eight 4-bit codes a
//! word, in AWQ's order), `P.qzeros` int32 `[in/group, out/8]`, `P.scales` float16 `[in/group,
//! out]`. GEMV (`version: gemv`): `P.qweight` `[out, in/8]` (codes in order along the input),
//! `P.qzeros` `[out, w]` and `P.scales` `[out, 8w]`, each row's groups padded to `w` words
//! (`IntLayout::AwqGemv`). `config.json`'s `quantization_config` (`quant_method: awq`) gives
//! `bits` (or `w_bit`), `group_size` (or `q_group_size`), `zero_point` and `version`; without
//! it, GEMM. GEMV_fast's interleaved words and the Marlin and IPEX exports are refused by name.
//! AutoRound's `auto-round` configs with `packing_format: auto_round:auto_awq` hold the GEMM
//! layout (`auto_round.rs`). Read only.

use dtcast_dtype::DType;
use dtcast_quant::{IntGroups, IntLayout, IntScheme, ZeroPoints};
use serde_json::Value;

use super::api::{QuantizedWeight, Reader, TensorData};
use super::auto_round;
use super::shared::{config_int, err, find, integer_weight, quantization_config};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

pub(super) struct Awq;

impl Reader for Awq {
    fn name(&self) -> &'static str {
        "AWQ"
    }

    fn quant_method(&self) -> &'static str {
        "awq"
    }

    fn other_methods(&self) -> &'static [&'static str] {
        &[auto_round::METHOD]
    }

    /// AutoAWQ's `modules_to_not_convert`: modules left dense.
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["modules_to_not_convert"]
    }

    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        e.name.strip_suffix(".scales")
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        config: Option<&Value>,
        _data: TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        let Some(qweight) = find(entries, &format!("{prefix}.qweight")) else {
            return Ok(None);
        };
        let method = super::super::quantized::config_method(config);
        let q = quantization_config(config).filter(|_| method.is_some());
        match method.as_deref() {
            None | Some("awq") => {}
            Some(auto_round::METHOD) if auto_round::packing(q)? == auto_round::Packing::Awq => {}
            Some(_) => return Ok(None),
        }
        let module = auto_round::module_config(q, prefix);
        let (w, s) = (&entries[qweight], &entries[scales]);
        if w.shape.len() != 2 || s.shape.len() != 2 {
            return Err(err(format!(
                "`{}` is {:?} and `{}` {:?}; AWQ stores both 2-D",
                quote(&w.name),
                w.shape,
                quote(&s.name),
                s.shape
            )));
        }
        let version = q.and_then(|q| q.get("version")).and_then(Value::as_str);
        let layout = match version.map(str::to_ascii_lowercase).as_deref() {
            None | Some("gemm") => IntLayout::Awq,
            Some("gemv") => IntLayout::AwqGemv,
            Some(v) => {
                return Err(err(format!(
                    "config.json's quantization_config has `version`: {}; dtcast reads AutoAWQ's \
                     GEMM and GEMV layouts",
                    quote(v)
                )))
            }
        };
        let (cols, rows, groups) = match layout {
            IntLayout::AwqGemv => (w.shape[1].saturating_mul(8), w.shape[0], 0),
            _ => (w.shape[0], s.shape[1], s.shape[0]),
        };
        if q.and_then(|q| q.get("zero_point")) == Some(&Value::Bool(false)) {
            return Err(err(
                "config.json's quantization_config has `zero_point`: false; dtcast reads AWQ \
                 with zero points only"
                    .to_owned(),
            ));
        }
        let bits = config_int(module, "bits")?
            .or(config_int(q, "bits")?)
            .or(config_int(q, "w_bit")?)
            .unwrap_or(4);
        if bits != 4 {
            return Err(err(format!(
                "`{}`: {bits}-bit AWQ codes; AutoAWQ's GEMM layout stores 4 bits",
                quote(&w.name)
            )));
        }
        let group_size = (config_int(module, "group_size")?)
            .or(config_int(q, "group_size")?)
            .or(config_int(q, "q_group_size")?);
        let grouping = match group_size {
            Some(k) if k > 0 => IntGroups::Size(k as usize),
            Some(-1) => IntGroups::Channel,
            Some(k) => {
                return Err(err(format!(
                    "config.json's quantization_config has `group_size`: {k}; AWQ's is a \
                     positive size"
                )))
            }
            None if layout == IntLayout::AwqGemv => {
                return Err(err(
                    "config.json's quantization_config has no `group_size`: AWQ GEMV pads its \
                     scales, which so do not say it"
                        .to_owned(),
                ))
            }
            None if groups == 1 => IntGroups::Channel,
            None if groups > 0 && cols % groups == 0 => IntGroups::Size(cols / groups),
            None => {
                return Err(err(format!(
                    "`{}`: {groups} groups over {cols} columns fit no group size",
                    quote(&s.name)
                )))
            }
        };
        let qzeros = find(entries, &format!("{prefix}.qzeros")).ok_or_else(|| {
            err(format!(
                "`{}` has no `{prefix}.qzeros` beside it: AWQ stores its zero points there",
                quote(&w.name)
            ))
        })?;
        if !matches!(s.dtype, DType::Float16 | DType::BFloat16 | DType::Float32) {
            return Err(err(format!(
                "`{}` is {}; AWQ's scales are float16",
                quote(&s.name),
                s.dtype
            )));
        }
        let scheme = IntScheme {
            layout,
            bits: 4,
            groups: grouping,
            zeros: ZeroPoints::Stored,
            scale: s.dtype,
        };
        integer_weight(
            entries,
            format!("{prefix}.weight"),
            if layout == IntLayout::AwqGemv {
                "awq_gemv"
            } else {
                "awq_gemm"
            },
            scheme,
            [qweight, scales],
            Some(qzeros),
            None,
            [rows, cols],
        )
        .map(Some)
    }
}
