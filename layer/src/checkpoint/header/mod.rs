//! The safetensors header, read by the strictest rules: every check the `safetensors` crate
//! makes, and the classes of malformed header other loaders have shipped bugs for (duplicate
//! keys, a tensor named `__metadata__`, reversed or wrapping offsets, size overflow, trailing
//! data, absurd header lengths, deep nesting).

use std::ops::Range;

use dtcast_dtype::DType;

use super::json::quote;
use super::shape::Shape;

mod parse;
mod write;

pub(crate) use write::build;

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
    pub shape: Shape,
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
        let parsed = parse::parse(text)?;
        let mut entries = Vec::with_capacity(parsed.tensors.len());
        for t in parsed.tensors {
            entries.push(entry(t, data_start)?);
        }
        let metadata = parsed.metadata;
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

/// The formats people pass for a safetensors file, by their first bytes: what the file is, in
/// words, where it is one of them.
const OTHER_FORMATS: [(&[u8], &str); 6] = [
    (
        b"GGUF",
        "a GGUF file (llama.cpp's format; `dtcast inspect` reads it)",
    ),
    (
        b"PK\x03\x04",
        "a zip archive (what torch.save writes: a PyTorch .bin / .pt / .pth checkpoint)",
    ),
    (b"\x80\x02", "a Python pickle (an older PyTorch checkpoint)"),
    (b"\x93NUMPY", "a NumPy .npy file"),
    (
        b"\x89HDF\r\n\x1a\n",
        "an HDF5 file (a Keras / TensorFlow .h5)",
    ),
    (b"\x1f\x8b", "a gzip-compressed file"),
];

/// What a file that starts with `first` is, where it is a format people mistake for
/// safetensors ([`OTHER_FORMATS`]; pickle protocols 2 to 5 alike).
pub(crate) fn other_format(first: &[u8]) -> Option<&'static str> {
    let pickle = matches!(first, [0x80, 2..=5, ..]);
    (OTHER_FORMATS.iter())
        .find(|(magic, _)| first.starts_with(magic) || (pickle && magic[0] == 0x80))
        .map(|(_, format)| *format)
}

/// A tensor as the header lists it, checked and placed in the file: its size within the one
/// rule for shapes, and its bytes those its shape and dtype need.
fn entry(t: parse::Listed, data_start: usize) -> Result<Entry, String> {
    let q = quote(&t.name);
    let (dtype, shape, (start, end)) = (t.dtype, t.shape, t.offsets);
    // The one size rule for shapes (no reader can index past 2^63 - 1).
    let elements = dtype
        .shape_elements(&shape)
        .map_err(|e| format!("tensor `{q}`: {e}"))?;
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
        name: t.name,
        dtype,
        shape,
        range: abs(start)?..abs(end)?,
    })
}
