//! Writing a safetensors header: the JSON text written straight from the tensors' names, dtypes
//! and shapes (no tree of JSON values in between, whose size would be many times the text's).

use std::io::Write;

use dtcast_dtype::DType;

use super::super::json::quote;
use crate::error::LayerError;

/// The header of a safetensors file for `tensors` (name, dtype, shape) in order, with
/// `metadata` first, padded with spaces so that the data starts 8-byte aligned.
pub(crate) fn build<N: AsRef<str>, S: AsRef<[usize]>>(
    tensors: &[(N, DType, S)],
    metadata: &[(String, String)],
) -> Result<Vec<u8>, LayerError> {
    check_names(tensors)?;
    let text = |e: serde_json::Error| LayerError::Output(e.to_string());
    let mut json = Vec::with_capacity(64 * tensors.len() + 64);
    json.push(b'{');
    if !metadata.is_empty() {
        json.extend_from_slice(br#""__metadata__":{"#);
        for (k, (key, value)) in metadata.iter().enumerate() {
            if k > 0 {
                json.push(b',');
            }
            serde_json::to_writer(&mut json, key).map_err(text)?;
            json.push(b':');
            serde_json::to_writer(&mut json, value).map_err(text)?;
        }
        json.push(b'}');
    }
    let mut offset = 0u64;
    for (k, (name, dtype, shape)) in tensors.iter().enumerate() {
        let (name, shape) = (name.as_ref(), shape.as_ref());
        let st = dtype.safetensors_name().ok_or(LayerError::Unstorable {
            name: name.to_owned(),
            dtype: *dtype,
        })?;
        let elements = shape.iter().product::<usize>();
        let len = dtype
            .storage_bytes(elements)
            .map_err(|e| LayerError::Output(format!("cannot save `{}`: {e}", quote(name))))?
            as u64;
        if k > 0 || !metadata.is_empty() {
            json.push(b',');
        }
        serde_json::to_writer(&mut json, name).map_err(text)?;
        write!(json, r#":{{"dtype":"{st}","shape":["#)?;
        for (i, d) in shape.iter().enumerate() {
            if i > 0 {
                json.push(b',');
            }
            write!(json, "{d}")?;
        }
        write!(json, r#"],"data_offsets":[{offset},{}]}}"#, offset + len)?;
        offset += len;
    }
    json.push(b'}');
    while (json.len() + 8) % 8 != 0 {
        json.push(b' ');
    }
    Ok(json)
}

/// No name twice, and none `__metadata__` (found by sorting indices: no set of names).
fn check_names<N: AsRef<str>, S>(tensors: &[(N, DType, S)]) -> Result<(), LayerError> {
    let name = |i: u32| tensors[i as usize].0.as_ref();
    let mut order: Vec<u32> = (0..tensors.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| name(a).cmp(name(b)));
    let clash = (order.windows(2))
        .find(|w| name(w[0]) == name(w[1]))
        .map(|w| name(w[0]))
        .or_else(|| {
            (0..tensors.len() as u32)
                .map(name)
                .find(|n| *n == "__metadata__")
        });
    match clash {
        Some(n) => Err(LayerError::Output(format!(
            "cannot save two tensors named `{}` (or one named `__metadata__`)",
            quote(n)
        ))),
        None => Ok(()),
    }
}
