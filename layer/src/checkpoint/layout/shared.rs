//! What several layouts' readers and writers share.

use dtcast_dtype::DType;
use dtcast_quant::Scheme;

use super::api::QuantizedWeight;
use crate::checkpoint::header::Entry;
use crate::checkpoint::json::quote;
use crate::error::LayerError;

/// The module a weight name or glob names: the glob less its parameter name (`a.*.weight` →
/// `a.*`), as configs list modules left unquantized.
pub(super) fn module_of<'a>(glob: &'a str, params: &[&str]) -> &'a str {
    params
        .iter()
        .find_map(|p| glob.strip_suffix(p))
        .unwrap_or(glob)
}

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

pub(super) fn err(message: String) -> LayerError {
    LayerError::Quantized(message)
}

/// `entries`' index of the tensor named `name`.
pub(super) fn find(entries: &[Entry], name: &str) -> Option<usize> {
    entries.iter().position(|e| e.name == name)
}

/// The error for a scale tensor whose weight tensor `what` is not in the file.
pub(super) fn missing(scale: &Entry, what: &str) -> LayerError {
    err(format!(
        "`{}` has no `{}` beside it in this file: a scale without its weight (a checkpoint \
         sharded between the two is not supported yet)",
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
        scheme,
        shape: e.shape.clone(),
        dense_shape: e.shape.clone(),
    };
    if scheme.element == DType::Float8E4M3Fn {
        check_scales(entries, &q)?;
    }
    Ok(q)
}

/// The scale (and global scale) tensors hold what the scheme needs for the weight's shape.
pub(super) fn check_scales(entries: &[Entry], q: &QuantizedWeight) -> Result<(), LayerError> {
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
