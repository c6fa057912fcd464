//! bitsandbytes as transformers serializes it. 4-bit (NF4, FP4): `P.weight` uint8 `[n/2, 1]`
//! (two codes a byte), `P.weight.absmax`, `P.weight.quant_map` (the codes' sixteen float32
//! values), `P.weight.quant_state.bitsandbytes__nf4` (or `__fp4`: JSON bytes — `quant_type`,
//! `blocksize`, `dtype`, `shape`, and for double quantization `nested_blocksize`,
//! `nested_offset`), with double quantization `P.weight.nested_absmax` and
//! `P.weight.nested_quant_map`. LLM.int8: `P.weight` int8 `[out, in]` and `P.SCB` float32
//! `[out]` (and, from older transformers, a `P.weight_format` byte). Read only.

use dtcast_dtype::DType;
use dtcast_quant::Bnb4Scheme;
use serde_json::Value;

use super::api::{QuantizedWeight, Reader, TensorData, WeightScheme};
use super::shared::{err, find};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

pub(super) struct BitsAndBytes;

/// The two 4-bit quant types, by the end of their `quant_state` tensor's name.
const QUANT_STATES: [(&str, &str); 2] = [
    ("quant_state.bitsandbytes__nf4", "bnb_nf4"),
    ("quant_state.bitsandbytes__fp4", "bnb_fp4"),
];

impl Reader for BitsAndBytes {
    fn name(&self) -> &'static str {
        "bitsandbytes"
    }

    fn quant_method(&self) -> &'static str {
        "bitsandbytes"
    }

    /// transformers' `llm_int8_skip_modules`: modules left dense (4-bit and 8-bit alike).
    fn dense_modules_keys(&self) -> &'static [&'static str] {
        &["llm_int8_skip_modules"]
    }

    fn scales_of<'a>(&self, e: &'a Entry) -> Option<&'a str> {
        (e.name.strip_suffix(".weight.absmax")).or_else(|| e.name.strip_suffix(".SCB"))
    }

    fn read(
        &self,
        entries: &[Entry],
        prefix: &str,
        scales: usize,
        _config: Option<&Value>,
        data: TensorData,
    ) -> Result<Option<QuantizedWeight>, LayerError> {
        let name = format!("{prefix}.weight");
        let weight = find(entries, &name).ok_or_else(|| {
            err(format!(
                "`{}` has no `{}` beside it (in the file, or in any shard of the checkpoint)",
                quote(&entries[scales].name),
                quote(&name)
            ))
        })?;
        if entries[scales].name.ends_with(".SCB") {
            return int8(entries, name, weight, scales).map(Some);
        }
        four_bit(entries, name, weight, scales, data).map(Some)
    }
}

/// LLM.int8: the int8 weight and its float32 SCB per row.
fn int8(
    entries: &[Entry],
    name: String,
    weight: usize,
    scb: usize,
) -> Result<QuantizedWeight, LayerError> {
    let (w, s) = (&entries[weight], &entries[scb]);
    let rows = match (w.dtype, &w.shape[..]) {
        (DType::Int8, [rows, _]) => *rows,
        _ => {
            return Err(err(format!(
                "`{}` is {} {:?}; LLM.int8 stores its weight as 2-D int8",
                quote(&w.name),
                w.dtype,
                w.shape
            )))
        }
    };
    if s.dtype != DType::Float32 || s.numel() != rows {
        return Err(err(format!(
            "`{}` is {} {:?}; LLM.int8 stores one float32 SCB per row of its [{rows}, {}] \
             weight",
            quote(&s.name),
            s.dtype,
            s.shape,
            w.shape[1]
        )));
    }
    let prefix = name.strip_suffix(".weight").unwrap_or(&name);
    let metadata = find(entries, &format!("{prefix}.weight_format"))
        .into_iter()
        .collect();
    Ok(QuantizedWeight {
        name,
        elements: weight,
        scales: scb,
        global: None,
        scheme_name: "bnb_int8",
        scheme: WeightScheme::Int8Rows,
        shape: w.shape.to_vec(),
        dense_shape: w.shape.to_vec(),
        activation: Vec::new(),
        metadata,
    })
}

/// NF4 / FP4: the packed weight, its absmax, quant map and quant state (read), and for double
/// quantization the nested absmax and quant map.
fn four_bit(
    entries: &[Entry],
    name: String,
    weight: usize,
    absmax: usize,
    data: TensorData,
) -> Result<QuantizedWeight, LayerError> {
    let part = |end: &str| find(entries, &format!("{name}.{end}"));
    let states: Vec<(usize, &'static str)> = (QUANT_STATES.iter())
        .filter_map(|(end, scheme)| part(end).map(|i| (i, *scheme)))
        .collect();
    let (state, scheme_name) = match states[..] {
        [one] => one,
        _ => {
            return Err(err(format!(
                "`{}` needs one `{}.quant_state.bitsandbytes__nf4` or `__fp4` beside it, and has \
                 {}",
                quote(&entries[absmax].name),
                quote(&name),
                states.len()
            )))
        }
    };
    let state_name = &entries[state].name;
    let json: Value = serde_json::from_slice(&data(state)?).map_err(|e| {
        err(format!(
            "`{}` is not the JSON bitsandbytes writes: {e}",
            quote(state_name)
        ))
    })?;
    let bad = |what: &str| {
        err(format!(
            "`{}` {what}; bitsandbytes writes {{\"quant_type\", \"blocksize\", \"dtype\", \
             \"shape\", ...}}",
            quote(state_name)
        ))
    };
    let count = |key: &str| -> Result<Option<usize>, LayerError> {
        match json.get(key) {
            None => Ok(None),
            Some(v) => (v.as_u64().and_then(|v| usize::try_from(v).ok()))
                .map(Some)
                .ok_or_else(|| bad(&format!("has `{key}`: {v}, not a count"))),
        }
    };
    let blocksize = count("blocksize")?.ok_or_else(|| bad("has no `blocksize`"))?;
    let shape: Vec<usize> = (json.get("shape").and_then(Value::as_array))
        .and_then(|s| s.iter().map(|d| d.as_u64().map(|d| d as usize)).collect())
        .ok_or_else(|| bad("has no `shape` of counts"))?;
    let dtype = match json.get("dtype").and_then(Value::as_str) {
        Some("float16") => DType::Float16,
        Some("bfloat16") => DType::BFloat16,
        Some("float32") => DType::Float32,
        _ => return Err(bad("has no `dtype` of float16, bfloat16 or float32")),
    };
    let quant_type = json.get("quant_type").and_then(Value::as_str);
    if quant_type != Some(&scheme_name["bnb_".len()..]) {
        return Err(bad(&format!(
            "says `quant_type` {}, not the {} its name says",
            quant_type.map_or("(none)".to_owned(), quote),
            &scheme_name["bnb_".len()..]
        )));
    }
    let nested = match (count("nested_blocksize")?, json.get("nested_offset")) {
        (None, None) => None,
        (Some(n), Some(offset)) => {
            let offset = offset
                .as_f64()
                .ok_or_else(|| bad("has a `nested_offset` that is not a number"))?;
            Some((n, offset as f32))
        }
        _ => {
            return Err(bad(
                "has one of `nested_blocksize` and `nested_offset` without the other",
            ))
        }
    };
    let scheme = Bnb4Scheme {
        blocksize,
        nested,
        dtype,
    };
    scheme
        .check()
        .map_err(|e| err(format!("`{}`: {e}", quote(state_name))))?;
    let n: usize = shape.iter().product();
    let (rows, cols) = match shape[..] {
        [rows, cols] => (rows, cols),
        _ => (n, 1),
    };
    // Every stored part is what the quant state's shape needs.
    let expect = |i: usize, dtype: DType, numel: usize| -> Result<(), LayerError> {
        let e = &entries[i];
        if e.dtype != dtype || e.numel() != numel {
            return Err(err(format!(
                "`{}` is {} {:?}; a {shape:?} weight in blocks of {blocksize} stores {numel} \
                 {dtype} there",
                quote(&e.name),
                e.dtype,
                e.shape
            )));
        }
        Ok(())
    };
    let blocks = n.div_ceil(blocksize);
    expect(weight, DType::UInt8, n.div_ceil(2))?;
    let quant_map = part("quant_map").ok_or_else(|| bad("has no `quant_map` tensor beside it"))?;
    expect(quant_map, DType::Float32, 16)?;
    let nested_parts = match nested {
        None => {
            expect(absmax, DType::Float32, blocks)?;
            None
        }
        Some((nested_blocksize, _)) => {
            expect(absmax, DType::UInt8, blocks)?;
            let (Some(a), Some(m)) = (part("nested_absmax"), part("nested_quant_map")) else {
                return Err(bad(
                    "says double quantization, and `nested_absmax` or `nested_quant_map` is missing",
                ));
            };
            expect(a, DType::Float32, blocks.div_ceil(nested_blocksize))?;
            expect(m, DType::Float32, 256)?;
            Some((a, m))
        }
    };
    Ok(QuantizedWeight {
        name,
        elements: weight,
        scales: absmax,
        global: None,
        scheme_name,
        scheme: WeightScheme::Bnb4 {
            scheme,
            quant_map,
            nested: nested_parts,
        },
        shape: vec![rows, cols],
        dense_shape: shape,
        activation: Vec::new(),
        metadata: vec![state],
    })
}
