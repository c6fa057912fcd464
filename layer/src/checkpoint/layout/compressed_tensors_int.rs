//! compressed-tensors' integer formats (what vLLM's W4A16, W8A16 and W8A8 checkpoints hold):
//! `pack-quantized` — `P.weight_packed` int32 `[out, ⌈in/(32/bits)⌉]`, `P.weight_shape` int64
//! `[2]` (the dense shape), `P.weight_scale` `[out, groups]` (`[out, 1]` per channel, `[1]` per
//! tensor), `P.weight_zero_point` int32 packed along the output dimension (asymmetric only),
//! `P.weight_g_idx` int32 `[in]` (act-order); and `int-quantized` / `naive-quantized` —
//! `P.weight` int8 with the same scales and int8 zero points. The bits, groups and symmetry are
//! read from the tensors themselves (the widths that fit `weight_shape`), and must agree with
//! the config group that `config.json` gives, where it gives one.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::{
    pack_zero_points, quantize_int_rows, Granularity, IntGroups, IntLayout, IntScheme, Scheme,
    ZeroPoints,
};
use serde_json::Value;

use super::api::{Part, QuantizedWeight, TensorData};
use super::shared::{band_rows, err, find, integer_weight, quantization_config};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::checkpoint::reader::Checkpoint;
use crate::error::LayerError;

/// The integer weight whose scales are `entries[scales]`, if `prefix`'s tensors are one
/// (`weight_packed` int32, or `weight` int8); `None` for compressed-tensors' float formats.
pub(super) fn read(
    entries: &[Entry],
    prefix: &str,
    scales: usize,
    config: Option<&Value>,
    data: TensorData,
) -> Result<Option<QuantizedWeight>, LayerError> {
    let packed = find(entries, &format!("{prefix}.weight_packed"))
        .filter(|&p| entries[p].dtype == DType::Int32);
    let int8 =
        find(entries, &format!("{prefix}.weight")).filter(|&w| entries[w].dtype == DType::Int8);
    let (codes, layout) = match (packed, int8) {
        (Some(p), _) => (p, IntLayout::CompressedTensors),
        (None, Some(w)) => (w, IntLayout::Int8),
        (None, None) => return Ok(None),
    };
    let s = &entries[scales];
    let c = &entries[codes];
    let zeros = find(entries, &format!("{prefix}.weight_zero_point"));
    let g_idx = find(entries, &format!("{prefix}.weight_g_idx"));
    let [rows, cols] = match layout {
        IntLayout::CompressedTensors => dense_shape(entries, prefix, c, data)?,
        _ => match c.shape[..] {
            [r, k] => [r, k],
            _ => {
                return Err(err(format!(
                    "`{}` has shape {:?}; quantized weights are 2-D",
                    quote(&c.name),
                    c.shape
                )))
            }
        },
    };
    let said_bits = config_weights(config)
        .and_then(|w| w.get("num_bits"))
        .and_then(Value::as_u64)
        .and_then(|b| u32::try_from(b).ok());
    let bits = match layout {
        IntLayout::CompressedTensors => packed_bits(c, cols, said_bits)?,
        _ => 8,
    };
    let groups = match (&s.shape[..], g_idx) {
        (_, _) if s.numel() == 1 && rows != 1 => IntGroups::Tensor,
        ([r, 1], _) if *r == rows => IntGroups::Channel,
        ([r, g], _) if *r == rows && *g > 0 && cols.div_ceil(cols.div_ceil(*g)) == *g => {
            IntGroups::Size(cols.div_ceil(*g))
        }
        _ => {
            return Err(err(format!(
                "`{}` is {:?}; a [{rows}, {cols}] weight's scales are [1] (per tensor), \
                 [{rows}, 1] (per channel) or [{rows}, groups]",
                quote(&s.name),
                s.shape
            )))
        }
    };
    // A config group that says how this layer's weights are quantized must agree.
    if let Some(w) = config_weights(config) {
        let said = |key: &str| w.get(key).filter(|v| !v.is_null());
        let agree = said("num_bits").is_none_or(|b| b.as_u64() == Some(u64::from(bits)))
            && said("symmetric").is_none_or(|v| v.as_bool() == Some(zeros.is_none()))
            && said("type").is_none_or(|t| t.as_str() == Some("int"));
        if !agree {
            return Err(err(format!(
                "`{}` holds {bits}-bit {} integer codes, but config.json's quantization_config \
                 says {w}",
                quote(&c.name),
                if zeros.is_some() {
                    "asymmetric"
                } else {
                    "symmetric"
                }
            )));
        }
    }
    if !matches!(s.dtype, DType::Float16 | DType::BFloat16 | DType::Float32) {
        return Err(err(format!(
            "`{}` is {}; compressed-tensors' integer weights have float16, bfloat16 or float32 \
             scales",
            quote(&s.name),
            s.dtype
        )));
    }
    let scheme = IntScheme {
        layout,
        bits,
        groups,
        zeros: if zeros.is_some() {
            ZeroPoints::Stored
        } else {
            ZeroPoints::Midpoint
        },
        scale: s.dtype,
    };
    let scheme_name = match layout {
        IntLayout::CompressedTensors => "ct_pack_quantized",
        _ => "ct_int_quantized",
    };
    let mut w = integer_weight(
        entries,
        format!("{prefix}.weight"),
        scheme_name,
        scheme,
        [codes, scales],
        zeros,
        g_idx,
        [rows, cols],
    )?;
    // `weight_shape` is metadata of the packed weight: it goes with it.
    if let Some(shape) = find(entries, &format!("{prefix}.weight_shape")) {
        w.metadata.push(shape);
    }
    Ok(Some(w))
}

/// `P.weight_shape`'s two values (int64), read.
fn dense_shape(
    entries: &[Entry],
    prefix: &str,
    packed: &Entry,
    data: TensorData,
) -> Result<[usize; 2], LayerError> {
    let name = format!("{prefix}.weight_shape");
    let i = find(entries, &name).ok_or_else(|| {
        err(format!(
            "`{}` has no `{}` beside it: compressed-tensors stores the dense shape there",
            quote(&packed.name),
            quote(&name)
        ))
    })?;
    let e = &entries[i];
    if !matches!(e.dtype, DType::Int64 | DType::Int32) || e.numel() != 2 {
        return Err(err(format!(
            "`{}` is {} {:?}; compressed-tensors stores a weight's shape as two int64",
            quote(&name),
            e.dtype,
            e.shape
        )));
    }
    let bytes = data(i)?;
    let size = e.dtype.byte_size().unwrap_or(8);
    let value = |k: usize| -> i64 {
        let b = &bytes[k * size..(k + 1) * size];
        match size {
            4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    };
    let (rows, cols) = (value(0), value(1));
    match (usize::try_from(rows), usize::try_from(cols)) {
        (Ok(r), Ok(c)) if packed.shape.first() == Some(&r) => Ok([r, c]),
        _ => Err(err(format!(
            "`{}` says [{rows}, {cols}], which is not the shape of `{}` {:?} unpacked",
            quote(&name),
            quote(&packed.name),
            packed.shape
        ))),
    }
}

/// The bits of a packed weight's codes: the width whose words fit `cols` columns (`said`: the
/// config's `num_bits`, where it gives one, choosing among several that fit).
fn packed_bits(packed: &Entry, cols: usize, said: Option<u32>) -> Result<u32, LayerError> {
    let words = match packed.shape[..] {
        [_, w] => w,
        _ => usize::MAX,
    };
    let fits = |b: &u32| (cols * *b as usize).div_ceil(32) == words;
    let fit: Vec<u32> = (1u32..=8).filter(fits).collect();
    match (said, &fit[..]) {
        (Some(b), _) if fits(&b) => Ok(b),
        (None, [bits]) => Ok(*bits),
        _ => Err(err(format!(
            "`{}` is {:?}; for {cols} columns, {}{}",
            quote(&packed.name),
            packed.shape,
            match said {
                Some(b) => format!(
                    "config.json's {b}-bit codes take {} int32 words a row",
                    (cols * b as usize).div_ceil(32)
                ),
                None => format!(
                    "2-, 4- and 8-bit codes take {}, {} and {} int32 words a row",
                    cols.div_ceil(16),
                    cols.div_ceil(8),
                    cols.div_ceil(4)
                ),
            },
            if fit.len() > 1 && said.is_none() {
                " (more than one width fits: config.json's num_bits says which)"
            } else {
                ""
            }
        ))),
    }
}

/// The `weights` of the one integer config group of `config.json`'s `quantization_config`, if
/// it has exactly one (mixed-precision checkpoints, whose groups target different modules, are
/// read from their tensors alone).
fn config_weights(config: Option<&Value>) -> Option<&Value> {
    let groups = quantization_config(config)?
        .get("config_groups")?
        .as_object()?;
    let int: Vec<&Value> = (groups.values())
        .filter_map(|g| g.get("weights"))
        .filter(|w| w.get("type").and_then(Value::as_str) == Some("int"))
        .collect();
    match int[..] {
        [one] => Some(one),
        _ => None,
    }
}

/// The tensors a weight `prefix.weight` of `[rows, cols]` becomes under an integer `scheme`, in
/// the order [`quantize`] writes them.
pub(super) fn parts(
    prefix: &str,
    [rows, cols]: [usize; 2],
    scheme: &Scheme,
    bits: u32,
    symmetric: bool,
) -> Vec<Part> {
    let groups = match scheme.granularity {
        Granularity::Group(k) if k > 0 => cols / k,
        _ => 1,
    };
    let bits = bits as usize;
    let mut out = vec![
        (
            format!("{prefix}.weight_packed"),
            DType::Int32,
            vec![rows, (cols * bits).div_ceil(32)],
        ),
        (
            format!("{prefix}.weight_scale"),
            scheme.scale,
            vec![rows, groups],
        ),
        (format!("{prefix}.weight_shape"), DType::Int64, vec![2]),
    ];
    if !symmetric {
        out.push((
            format!("{prefix}.weight_zero_point"),
            DType::Int32,
            vec![(rows * bits).div_ceil(32), groups],
        ));
    }
    out
}

/// Writes [`parts`]' bytes, quantizing `e` a band of whole rows at a time (the codes as they
/// are made; the scales and zero points, a fraction of them, at the end).
pub(super) fn quantize(
    ckpt: &Checkpoint,
    e: &Entry,
    scheme: &Scheme,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<(), LayerError> {
    let (rows, cols) = (e.shape[0], e.shape[1]);
    let Some((bits, symmetric)) = scheme.integer() else {
        return Err(err(format!("`{}`: not an integer scheme", quote(&e.name))));
    };
    let row_bytes = e.dtype.storage_bytes(cols).unwrap_or(0);
    let band = band_rows(row_bytes, 1);
    let named = |x: dtcast_quant::QuantError| err(format!("`{}`: {x}", quote(&e.name)));
    let mut scales = Vec::new();
    let mut zeros = Vec::new();
    let mut input = Vec::new();
    for first in (0..rows).step_by(band.max(1)) {
        let count = band.min(rows - first);
        input.resize(count * row_bytes, 0);
        ckpt.read_into(e, first * row_bytes, &mut input)?;
        let q = quantize_int_rows(&input, e.dtype, cols, scheme).map_err(named)?;
        out.write_all(&q.packed)?;
        scales.extend_from_slice(&q.scales);
        zeros.extend_from_slice(&q.zeros);
        progress(input.len() as u64);
    }
    out.write_all(&scales)?;
    for d in [rows, cols] {
        out.write_all(&(d as i64).to_le_bytes())?;
    }
    if !symmetric {
        let groups = zeros.len() / rows.max(1);
        out.write_all(&pack_zero_points(&zeros, rows, groups, bits))?;
    }
    Ok(())
}

/// The `weights` of compressed-tensors' config group for an integer preset (`reference`: its
/// reference name), with `group_size` where given; `None` for the other schemes.
pub(super) fn config_weights_for(reference: &str, group_size: Option<usize>) -> Option<Value> {
    let scheme = Scheme::named(reference, DType::BFloat16).ok()?;
    let (bits, symmetric) = scheme.integer()?;
    let (strategy, group) = match scheme.granularity {
        Granularity::Group(k) => ("group", Value::from(group_size.unwrap_or(k))),
        _ => ("channel", Value::Null),
    };
    Some(
        serde_json::json!({"dynamic": false, "group_size": group, "num_bits": bits,
                            "strategy": strategy, "symmetric": symmetric, "type": "int"}),
    )
}
