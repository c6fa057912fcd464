//! The safetensors header, read by the strictest rules: every check the `safetensors` crate
//! makes, and the classes of malformed header other loaders have shipped bugs for (duplicate
//! keys, a tensor named `__metadata__`, reversed or wrapping offsets, size overflow, trailing
//! data, absurd header lengths, deep nesting).

use std::ops::Range;

use dtcast_dtype::DType;
use serde_json::{Map, Value};

use super::json::{self, quote};
use crate::error::LayerError;

/// The largest header accepted, in bytes (the `safetensors` crate's limit). A larger length is
/// refused before anything is allocated.
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// safetensors dtypes that dtcast cannot read yet.
const UNSUPPORTED: [&str; 3] = ["F4", "F6_E2M3", "F6_E3M2"];

/// One tensor of a checkpoint: where its bytes are in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The tensor's name.
    pub name: String,
    /// Its dtype.
    pub dtype: DType,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Byte range within the file.
    pub range: Range<usize>,
}

impl Entry {
    /// The number of elements.
    pub fn numel(&self) -> usize {
        // The header's validation made the range a whole number of elements.
        self.dtype.elements_in(self.range.len()).unwrap_or(0)
    }
}

/// A validated header: the tensors in file order and the `__metadata__` strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The tensors, ordered by their data offsets.
    pub entries: Vec<Entry>,
    /// `__metadata__`, in header order.
    pub metadata: Vec<(String, String)>,
    /// Where the data starts: 8 + the header's length.
    pub data_start: usize,
}

impl Header {
    /// Validates a whole file held in memory (for tests and fuzzing; [`Checkpoint`](super::Checkpoint)
    /// reads the header from the file without loading the data).
    ///
    /// ```
    /// use dtcast::layer::checkpoint::Header;
    /// let json = br#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    /// let mut file = (json.len() as u64).to_le_bytes().to_vec();
    /// file.extend(json);
    /// file.extend([0u8; 4]);
    /// let h = Header::from_bytes(&file)?;
    /// assert_eq!(h.entries[0].name, "a");
    /// let e = Header::from_bytes(&file[..file.len() - 1]).unwrap_err();
    /// assert!(e.contains("data"), "{e}");
    /// # Ok::<(), String>(())
    /// ```
    pub fn from_bytes(file: &[u8]) -> Result<Header, String> {
        let len = header_len(file.get(..8).unwrap_or(file), file.len() as u64)?;
        let end = 8 + len as usize;
        Header::parse(&file[8..end], file.len() as u64)
    }

    /// Validates the header JSON `json` of a file of `file_len` bytes.
    pub fn parse(json: &[u8], file_len: u64) -> Result<Header, String> {
        let data_start = 8 + json.len();
        let data_len = file_len
            .checked_sub(data_start as u64)
            .ok_or("the header runs past the end of the file")?;
        // As the safetensors crate requires: the JSON starts at once (no leading whitespace).
        if json.first() != Some(&b'{') {
            return Err("the header does not start with `{`".to_owned());
        }
        let text = std::str::from_utf8(json).map_err(|e| {
            format!(
                "the header is not valid UTF-8 (byte {} of the header)",
                e.valid_up_to()
            )
        })?;
        let value = json::parse(text).map_err(|e| format!("the header is not valid JSON: {e}"))?;
        let Value::Object(map) = value else {
            return Err("the header is not a JSON object".to_owned());
        };
        let mut metadata = Vec::new();
        let mut entries = Vec::with_capacity(map.len());
        for (name, v) in map {
            if name == "__metadata__" {
                metadata = parse_metadata(v)?;
            } else {
                entries.push(parse_entry(name, v, data_start)?);
            }
        }
        // File order; empty tensors (equal offsets) keep header order among themselves.
        entries.sort_by_key(|e| (e.range.start, e.range.end));
        let mut expected = data_start;
        for e in &entries {
            if e.range.start != expected {
                let what = if e.range.start < expected {
                    "overlaps the tensor before it"
                } else {
                    "leaves a gap after the tensor before it"
                };
                return Err(format!(
                    "tensor `{}` starts at data offset {}: it {what} (tensors must cover the data exactly, in order)",
                    quote(&e.name),
                    e.range.start - data_start
                ));
            }
            expected = e.range.end;
        }
        let covered = (expected - data_start) as u64;
        if covered != data_len {
            return Err(if covered > data_len {
                format!("the tensors need {covered} bytes of data but the file holds {data_len} (it is truncated)")
            } else {
                format!(
                    "the tensors' data ends {} bytes before the end of the file (trailing bytes)",
                    data_len - covered
                )
            });
        }
        Ok(Header {
            entries,
            metadata,
            data_start,
        })
    }
}

/// The header length from the first 8 bytes, checked against the cap and the file size before
/// anything is allocated.
pub(crate) fn header_len(first8: &[u8], file_len: u64) -> Result<u64, String> {
    let bytes: [u8; 8] = first8.try_into().map_err(|_| {
        format!("the file is {file_len} bytes, too short for the 8-byte header length")
    })?;
    let n = u64::from_le_bytes(bytes);
    if n > MAX_HEADER_LEN {
        return Err(format!(
            "the header length {n} exceeds the limit of {MAX_HEADER_LEN} bytes"
        ));
    }
    if n > file_len.saturating_sub(8) {
        return Err(format!(
            "the header length {n} runs past the end of the file ({file_len} bytes)"
        ));
    }
    Ok(n)
}

fn parse_metadata(v: Value) -> Result<Vec<(String, String)>, String> {
    let Value::Object(m) = v else {
        return Err("`__metadata__` is not an object of strings".to_owned());
    };
    if m.contains_key("data_offsets") || m.contains_key("dtype") && m.contains_key("shape") {
        return Err(
            "a tensor is named `__metadata__`, which safetensors reserves for metadata".to_owned(),
        );
    }
    m.into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            _ => Err(format!(
                "`__metadata__` value of `{}` is not a string",
                quote(&k)
            )),
        })
        .collect()
}

fn parse_entry(name: String, v: Value, data_start: usize) -> Result<Entry, String> {
    let q = quote(&name);
    let Value::Object(mut fields) = v else {
        return Err(format!("tensor `{q}` is not an object"));
    };
    let mut take = |field: &str| {
        fields
            .remove(field)
            .ok_or_else(|| format!("tensor `{q}` has no `{field}`"))
    };
    let (dtype, shape, offsets) = (take("dtype")?, take("shape")?, take("data_offsets")?);
    if let Some(extra) = fields.keys().next() {
        return Err(format!(
            "tensor `{q}` has an unknown field `{}` (expected dtype, shape, data_offsets)",
            quote(extra)
        ));
    }
    let dtype = parse_dtype(&q, &dtype)?;
    let shape = parse_shape(&q, &shape)?;
    let (start, end) = parse_offsets(&q, &offsets)?;
    let elements = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|n| n.checked_mul(dtype.bits()).is_some())
        .ok_or_else(|| {
            format!("tensor `{q}`: shape {shape:?} is too large (its size overflows)")
        })?;
    let numel = dtype.storage_bytes(elements).map_err(|_| {
        format!(
            "tensor `{q}`: shape {shape:?} of {} ({} bits each) does not end at a byte boundary",
            dtype.name(),
            dtype.bits()
        )
    })? as u64;
    if end - start != numel {
        return Err(format!(
            "tensor `{q}`: shape {shape:?} of {} needs {numel} bytes but its data_offsets [{start}, {end}] hold {}",
            dtype.name(),
            end - start
        ));
    }
    let abs = |x: u64| {
        usize::try_from(x)
            .ok()
            .and_then(|x| x.checked_add(data_start))
            .ok_or_else(|| format!("tensor `{q}`: data_offsets [{start}, {end}] overflow"))
    };
    Ok(Entry {
        name,
        dtype,
        shape,
        range: abs(start)?..abs(end)?,
    })
}

fn parse_dtype(q: &str, v: &Value) -> Result<DType, String> {
    let Value::String(s) = v else {
        return Err(format!("tensor `{q}`: dtype is not a string"));
    };
    DType::from_safetensors_name(s).ok_or_else(|| {
        if UNSUPPORTED.contains(&s.as_str()) {
            format!("tensor `{q}` has dtype {s}, which dtcast does not support yet")
        } else {
            format!(
                "tensor `{q}` has dtype `{}`, which is not a safetensors dtype",
                quote(s)
            )
        }
    })
}

fn parse_shape(q: &str, v: &Value) -> Result<Vec<usize>, String> {
    let bad = || format!("tensor `{q}`: shape is not a list of non-negative integers");
    let Value::Array(dims) = v else {
        return Err(bad());
    };
    dims.iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(bad)
        })
        .collect()
}

fn parse_offsets(q: &str, v: &Value) -> Result<(u64, u64), String> {
    let bad = || format!("tensor `{q}`: data_offsets is not a pair of non-negative integers");
    let Value::Array(pair) = v else {
        return Err(bad());
    };
    let [start, end] = pair.as_slice() else {
        return Err(bad());
    };
    let (start, end) = (
        start.as_u64().ok_or_else(bad)?,
        end.as_u64().ok_or_else(bad)?,
    );
    if end < start {
        return Err(format!(
            "tensor `{q}`: data_offsets [{start}, {end}] are reversed"
        ));
    }
    Ok((start, end))
}

/// The header of a safetensors file for `tensors` (name, dtype, shape) in order, with
/// `metadata`, padded with spaces so that the data starts 8-byte aligned.
pub(crate) fn build(
    tensors: &[(String, DType, Vec<usize>)],
    metadata: &[(String, String)],
) -> Result<Vec<u8>, LayerError> {
    let mut map = Map::new();
    if !metadata.is_empty() {
        let m: Map<String, Value> = metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        map.insert("__metadata__".to_owned(), Value::Object(m));
    }
    let mut offset = 0u64;
    for (name, dtype, shape) in tensors {
        let st = dtype.safetensors_name().ok_or(LayerError::Unstorable {
            name: name.clone(),
            dtype: *dtype,
        })?;
        if name == "__metadata__" || map.contains_key(name) {
            return Err(LayerError::Output(format!(
                "cannot save two tensors named `{}` (or one named `__metadata__`)",
                quote(name)
            )));
        }
        let elements = shape.iter().product::<usize>();
        let len = dtype
            .storage_bytes(elements)
            .map_err(|e| LayerError::Output(format!("cannot save `{}`: {e}", quote(name))))?
            as u64;
        map.insert(
            name.clone(),
            serde_json::json!({ "dtype": st, "shape": shape, "data_offsets": [offset, offset + len] }),
        );
        offset += len;
    }
    let mut json =
        serde_json::to_vec(&Value::Object(map)).map_err(|e| LayerError::Output(e.to_string()))?;
    while (json.len() + 8) % 8 != 0 {
        json.push(b' ');
    }
    Ok(json)
}
