//! What several layouts' readers and writers share.

use std::io::Write;

use dtcast_dtype::DType;
use dtcast_quant::{quantize_rows, IntPart, IntScheme, QuantError, Scheme, TensorAmax};
use serde_json::Value;

use super::api::{QuantizedWeight, WeightScheme};
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

/// Whether compressed-tensors' default targets include `e`: a 2-D floating `*.weight` that is
/// not an embedding or the output head.
pub(super) fn is_linear_weight(e: &Entry) -> bool {
    let name = e.name.as_str();
    e.dtype.is_floating_point()
        && e.shape.len() == 2
        && name.ends_with(".weight")
        && !name.contains("embed")
        && !name.starts_with("lm_head")
        && !name.contains(".lm_head")
}

/// Input bytes a band of rows aims at when a weight is quantized.
const BAND_BYTES: usize = 8 << 20;

/// Rows per band of a weight whose rows are `row_bytes` long: about [`BAND_BYTES`] of input, a
/// multiple of `alignment` (a 2-D block's rows), at least one such multiple.
pub(super) fn band_rows(row_bytes: usize, alignment: usize) -> usize {
    let alignment = alignment.max(1);
    (BAND_BYTES / row_bytes.max(1) / alignment).max(1) * alignment
}

/// Writes a weight quantized a band of `band` rows at a time (`read(first, count, buf)`: rows
/// `first..first + count` of the `[rows, cols]` matrix the scheme is given, as stored, into
/// `buf`): the elements band by band as they are made, then the scales (kept until the end: a
/// fraction of the elements), then the global scale. Where a scale depends on the whole tensor
/// (a per-tensor or a global scale), a first pass reads every band for its amax. Memory: one
/// band of input and of elements, and the scales.
pub(super) fn quantize_bands(
    e: &Entry,
    scheme: &Scheme,
    [rows, cols]: [usize; 2],
    band: usize,
    mut read: impl FnMut(usize, usize, &mut Vec<u8>) -> Result<(), LayerError>,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<(), LayerError> {
    let named = |err: QuantError| err_named(e, err);
    // Band starts; one empty band for a weight of no rows (its scales are still written), and
    // one band of every row for a weight of no columns: nothing to read, and bands of a fixed
    // byte size would be 2^40 of them for 2^60 empty rows.
    let band = if cols == 0 { rows.max(1) } else { band.max(1) };
    let starts = (0..rows.max(1)).step_by(band);
    let mut input = Vec::new();
    let mut amax = TensorAmax::default();
    if scheme.uses_tensor_amax() {
        for first in starts.clone() {
            read(first, band.min(rows - first), &mut input)?;
            amax.update(&input, e.dtype, scheme).map_err(named)?;
        }
    }
    let scale_size = scheme.scale.byte_size().unwrap_or(1);
    // (An error, not an abort, where the scales of the shape cannot be allocated.)
    let mut scales = scheme.scale_buffer(rows, cols).map_err(named)?;
    let mut elements = Vec::new();
    let mut global = None;
    for first in starts {
        let end = (first + band).min(rows);
        read(first, end - first, &mut input)?;
        let stored = scheme.element.storage_bytes((end - first) * cols);
        elements.resize(stored.unwrap_or(0), 0);
        let at = scheme.scale_range(first, end, cols);
        let band_scales = &mut scales[at.start * scale_size..at.end * scale_size];
        let shape = [rows, cols];
        global = quantize_rows(
            &input,
            e.dtype,
            &shape,
            first..end,
            scheme,
            amax,
            &mut elements,
            band_scales,
        )
        .map_err(named)?;
        out.write_all(&elements)?;
        progress(input.len() as u64);
    }
    out.write_all(&scales)?;
    if let Some(g) = global {
        out.write_all(&g.to_le_bytes())?;
    }
    Ok(())
}

/// [`quantize_bands`] over `e` read from `ckpt` as a `[rows, cols]` matrix of whole rows: the
/// layouts' default way of writing a quantized weight.
pub(super) fn quantize_matrix(
    ckpt: &crate::checkpoint::reader::Checkpoint,
    e: &Entry,
    (rows, cols): (usize, usize),
    scheme: &Scheme,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<(), LayerError> {
    let row_bytes = e.dtype.storage_bytes(cols).unwrap_or(0);
    let band = band_rows(row_bytes, scheme.row_alignment());
    let read = |first: usize, count: usize, buf: &mut Vec<u8>| {
        buf.resize(count * row_bytes, 0);
        ckpt.read_into(e, first * row_bytes, buf)
    };
    quantize_bands(e, scheme, [rows, cols], band, read, out, progress)
}

/// A quantization error, naming the weight.
pub(super) fn err_named(e: &Entry, err: QuantError) -> LayerError {
    LayerError::Quantized(format!("`{}`: {err}", quote(&e.name)))
}

pub(super) fn err(message: String) -> LayerError {
    LayerError::Quantized(message)
}

/// `entries`' index of the tensor named `name`.
pub(super) fn find(entries: &[Entry], name: &str) -> Option<usize> {
    entries.iter().position(|e| e.name == name)
}

/// The error for a scale tensor whose weight tensor `what` is not in the checkpoint (the file,
/// or any shard: a sharded checkpoint's shards lend each other the tensors of a module).
pub(super) fn missing(scale: &Entry, what: &str) -> LayerError {
    err(format!(
        "`{}` has no `{}` beside it (in the file, or in any shard of the checkpoint): a scale \
         without its weight",
        quote(&scale.name),
        quote(what)
    ))
}

/// Whether `prefix.weight` is stored dense (a float wider than a byte, no `prefix.weight_packed`):
/// scales beside it do not make it a quantized weight.
pub(super) fn stored_dense(entries: &[Entry], prefix: &str) -> bool {
    find(entries, &format!("{prefix}.weight_packed")).is_none()
        && find(entries, &format!("{prefix}.weight"))
            .is_some_and(|w| entries[w].dtype.bits() > 8 && entries[w].dtype.is_floating_point())
}

pub(super) fn rows_cols(shape: &[usize]) -> (usize, usize) {
    match shape {
        [rows, cols] => (*rows, *cols),
        _ => (0, 0),
    }
}

/// A 2-D weight whose elements entry must be float8_e4m3fn (or packed uint8, checked by the
/// caller).
pub(super) fn two_d(
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
        scheme: super::api::WeightScheme::Scaled(scheme),
        shape: e.shape.to_vec(),
        dense_shape: e.shape.to_vec(),
        activation: Vec::new(),
        metadata: Vec::new(),
    };
    if scheme.element == DType::Float8E4M3Fn {
        check_scales(entries, &q)?;
    }
    Ok(q)
}

/// The scale (and global scale) tensors hold what the scheme needs for the weight's shape.
pub(super) fn check_scales(entries: &[Entry], q: &QuantizedWeight) -> Result<(), LayerError> {
    let (rows, cols) = rows_cols(&q.shape);
    let Some(scheme) = q.scheme.scaled() else {
        return Ok(());
    };
    let count = scheme
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

/// `config.json`'s `quantization_config`, if there is one.
pub(super) fn quantization_config(config: Option<&Value>) -> Option<&Value> {
    config?.get("quantization_config")
}

/// An integer of `quantization_config` (`key`), if given (`null` is not given); anything but an
/// integer is an error naming it.
pub(super) fn config_int(q: Option<&Value>, key: &str) -> Result<Option<i64>, LayerError> {
    match q.and_then(|q| q.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            err(format!(
                "config.json's quantization_config has `{key}`: {v}, which is not an integer"
            ))
        }),
    }
}

/// The tensors of an integer-quantized weight (`parts`: the entries of its codes, scales, zero
/// points and group index), each checked against the dtype and shape `scheme` stores for a
/// `[rows, cols]` weight.
#[allow(clippy::too_many_arguments)]
pub(super) fn integer_weight(
    entries: &[Entry],
    name: String,
    scheme_name: &'static str,
    scheme: IntScheme,
    [codes, scales]: [usize; 2],
    zeros: Option<usize>,
    group_index: Option<usize>,
    [rows, cols]: [usize; 2],
) -> Result<QuantizedWeight, LayerError> {
    let named = |e: QuantError| err(format!("`{}` ({scheme_name}): {e}", quote(&name)));
    scheme.check().map_err(named)?;
    let parts = [
        (Some(codes), IntPart::Codes),
        (Some(scales), IntPart::Scales),
        (zeros, IntPart::Zeros),
        (group_index, IntPart::GroupIndex),
    ];
    for (entry, part) in parts {
        let Some(i) = entry else { continue };
        let e = &entries[i];
        let shape = scheme.part_shape(part, rows, cols).map_err(named)?;
        let dtype = scheme.part_dtype(part);
        // A one-element part may be stored as a scalar or as [1] (compressed-tensors' per-tensor
        // scale).
        let same_shape =
            e.shape == shape || (e.numel() == 1 && shape.iter().product::<usize>() == 1);
        if e.dtype != dtype || !same_shape {
            return Err(err(format!(
                "`{}` is {} {:?}; a [{rows}, {cols}] {scheme_name} weight of {} bits stores it as {dtype} {shape:?}",
                quote(&e.name),
                e.dtype,
                e.shape,
                scheme.bits
            )));
        }
    }
    Ok(QuantizedWeight {
        name,
        elements: codes,
        scales,
        global: None,
        scheme_name,
        scheme: WeightScheme::Integer {
            scheme,
            zeros,
            group_index,
        },
        shape: vec![rows, cols],
        dense_shape: vec![rows, cols],
        activation: Vec::new(),
        metadata: Vec::new(),
    })
}
