//! GPTQ (AutoGPTQ, GPTQModel, and the exports that follow them): `P.qweight` int32
//! `[in·bits/32, out]`, `P.qzeros` int32 `[groups, out·bits/32]`, `P.scales` float16 `[groups,
//! out]` and `P.g_idx` int32 `[in]` (a group per input column: act-order when `desc_act`).
//! `config.json`'s `quantization_config` (`quant_method: gptq`) gives `bits`, `group_size` and
//! `checkpoint_format` (GPTQModel 7 also writes it as `format`: `gptq`, v1, zeros stored minus
//! one; `gptq_v2`, as they are); AutoRound's `auto-round` configs name the zeros by their
//! `packing_format` (`auto_round.rs`). Read only.

use dtcast_dtype::DType;
use dtcast_quant::{IntGroups, IntLayout, IntScheme, ZeroPoints};
use serde_json::Value;

use super::api::{QuantizedWeight, Reader, TensorData};
use super::auto_round;
use super::shared::{config_int, err, find, integer_weight, quantization_config};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

pub(super) struct Gptq;

impl Reader for Gptq {
    fn name(&self) -> &'static str {
        "GPTQ"
    }

    fn quant_method(&self) -> &'static str {
        "gptq"
    }

    fn other_methods(&self) -> &'static [&'static str] {
        &[auto_round::METHOD]
    }

    /// GPTQModel lists the modules it left dense nowhere (they are stored as plain weights).
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &[]
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
        let q = quantization_config(config)
            .filter(|_| matches!(method.as_deref(), Some("gptq" | auto_round::METHOD)));
        let (w, s) = (&entries[qweight], &entries[scales]);
        // AWQ names its tensors alike; its qweight is [in, out/8], GPTQ's [in·bits/32, out].
        let auto_round_zeros = match method.as_deref() {
            Some(auto_round::METHOD) => match auto_round::packing(q)? {
                auto_round::Packing::Gptq(zeros) => Some(zeros),
                auto_round::Packing::Awq => return Ok(None),
            },
            _ => None,
        };
        // (AutoRound may give a module bits or a group size of its own.)
        let module = auto_round::module_config(q, prefix);
        match method.as_deref() {
            Some("gptq" | auto_round::METHOD) => {}
            Some(_) => return Ok(None),
            None if w.shape.len() == 2 && s.shape.len() == 2 && w.shape[1] != s.shape[1] => {
                return Ok(None)
            }
            None => {}
        }
        let qzeros = find(entries, &format!("{prefix}.qzeros")).ok_or_else(|| {
            err(format!(
                "`{}` has no `{prefix}.qzeros` beside it: GPTQ stores its zero points there",
                quote(&w.name)
            ))
        })?;
        let g_idx = find(entries, &format!("{prefix}.g_idx"));
        if w.shape.len() != 2 || s.shape.len() != 2 {
            return Err(err(format!(
                "`{}` is {:?} and `{}` {:?}; GPTQ stores both 2-D",
                quote(&w.name),
                w.shape,
                quote(&s.name),
                s.shape
            )));
        }
        let (words, rows, groups) = (w.shape[0], w.shape[1], s.shape[0]);
        let bits = match (
            config_int(module, "bits")?.or(config_int(q, "bits")?),
            g_idx,
        ) {
            (Some(b), _) => b,
            // Without a config, the group index gives the input width, and so the bits.
            (None, Some(g)) if entries[g].numel() > 0 && (words * 32) % entries[g].numel() == 0 => {
                ((words * 32) / entries[g].numel()) as i64
            }
            (None, _) => {
                return Err(err(format!(
                    "`{}`: a GPTQ weight's bits are in config.json's quantization_config \
                     (`bits`), and there is none beside this file",
                    quote(&w.name)
                )))
            }
        };
        let bits = u32::try_from(bits)
            .ok()
            .filter(|b| [2, 3, 4, 8].contains(b))
            .ok_or_else(|| {
                err(format!(
                    "`{}`: {bits}-bit GPTQ codes; GPTQ stores 2, 3, 4 or 8 bits",
                    quote(&w.name)
                ))
            })?;
        let cols = words * 32 / bits as usize;
        let group_size = config_int(module, "group_size")?.or(config_int(q, "group_size")?);
        let grouping = match group_size {
            Some(-1) => IntGroups::Channel,
            Some(k) if k > 0 => IntGroups::Size(k as usize),
            Some(k) => {
                return Err(err(format!(
                    "config.json's quantization_config has `group_size`: {k}; GPTQ's is -1 (one \
                     group) or a positive size"
                )))
            }
            None if groups == 1 => IntGroups::Channel,
            None if groups > 0 && cols.is_multiple_of(groups) => IntGroups::Size(cols / groups),
            None => {
                return Err(err(format!(
                    "`{}`: {groups} groups over {cols} columns fit no group size, and no \
                     config.json says it",
                    quote(&s.name)
                )))
            }
        };
        let format = ["checkpoint_format", "format"]
            .iter()
            .find_map(|k| q.and_then(|q| q.get(*k)).and_then(Value::as_str));
        let zeros = match (auto_round_zeros, format) {
            (Some(zeros), _) => zeros,
            (None, None | Some("gptq")) => ZeroPoints::StoredMinusOne,
            (None, Some("gptq_v2")) => ZeroPoints::Stored,
            (None, Some(other)) => {
                return Err(err(format!(
                    "config.json's quantization_config has `checkpoint_format`: {}; GPTQ's are \
                     `gptq` and `gptq_v2`",
                    quote(other)
                )))
            }
        };
        let scheme = IntScheme {
            layout: IntLayout::Gptq,
            bits,
            groups: grouping,
            zeros,
            scale: s.dtype,
        };
        let name = format!("{prefix}.weight");
        let scheme_name = match zeros {
            ZeroPoints::Stored => "gptq_v2",
            _ => "gptq",
        };
        if s.dtype == DType::Float32 || s.dtype == DType::Float16 || s.dtype == DType::BFloat16 {
            integer_weight(
                entries,
                name,
                scheme_name,
                scheme,
                [qweight, scales],
                Some(qzeros),
                g_idx,
                [rows, cols],
            )
            .map(Some)
        } else {
            Err(err(format!(
                "`{}` is {}; GPTQ's scales are float16 (or bfloat16, float32)",
                quote(&s.name),
                s.dtype
            )))
        }
    }
}
