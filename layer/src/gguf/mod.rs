//! GGUF files (llama.cpp's format, versions 2 and 3): the header read by the strictest rules.
//!
//! A GGUF file is a header — the magic `GGUF`, a version, counts, metadata key–value pairs of
//! thirteen value types ([`GgufValue`]), one entry per tensor (name, dimensions innermost first,
//! ggml type, data offset) — then, from the header's end padded to `general.alignment` (32
//! where it does not say), each tensor's bytes. [`read_gguf`] refuses, with the reason and the
//! byte where it starts: a file that is not GGUF or not version 2 or 3 (big-endian files by
//! name), counts and lengths that cannot fit in the bytes left (checked before anything of
//! that size is allocated; the header at most [`MAX_HEADER_BYTES`], [`MAX_VALUES`] values),
//! keys or tensor names that are not UTF-8 or appear twice, unknown value or ggml types, bools
//! other than 0 or 1, arrays nested more than 8 deep, tensors of 0 or more than 4 dimensions,
//! of more elements than memory holds, or whose rows are not whole blocks of their type, an
//! alignment that is not a `UINT32` power of two, and data laid out other than as llama.cpp
//! reads it: each tensor where the one before ends, padded to the alignment, within the file.
//!
//! ```no_run
//! let gguf = dtcast_layer::gguf::read_gguf("model.gguf".as_ref())?;
//! for t in &gguf.tensors {
//!     println!("{} {} {:?}", t.name, t.ggml, t.shape());
//! }
//! # Ok::<(), dtcast_layer::LayerError>(())
//! ```

mod parse;
mod value;

use std::io::BufReader;
use std::path::Path;

use dtcast_quant::GgmlType;

pub use parse::{MAX_HEADER_BYTES, MAX_VALUES};
pub use value::{group_thousands, type_name, GgufValue};

use crate::LayerError;

/// A GGUF file's header.
#[derive(Clone, Debug, PartialEq)]
pub struct Gguf {
    /// 2 or 3.
    pub version: u32,
    /// The data's alignment (`general.alignment`, or 32).
    pub alignment: u64,
    /// The metadata, in the file's order.
    pub metadata: Vec<(String, GgufValue)>,
    /// The tensors, in the file's order.
    pub tensors: Vec<GgufTensor>,
    /// Where the data starts in the file.
    pub data_start: u64,
}

impl Gguf {
    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// One tensor's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufTensor {
    /// Its name.
    pub name: String,
    /// Its ggml type.
    pub ggml: GgmlType,
    /// Its dimensions as GGUF lists them: innermost (contiguous) first.
    pub dims: Vec<u64>,
    /// Where its bytes start, from the start of the data.
    pub offset: u64,
    /// How many bytes it takes.
    pub bytes: u64,
}

impl GgufTensor {
    /// Its row-major shape (GGUF's dimensions reversed: numpy's and safetensors' order).
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }

    /// Its elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// Whether `bytes` (a file's first bytes) start as a GGUF file does.
pub fn is_gguf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"GGUF")
}

/// The header of the GGUF file at `path`, checked (see the module's docs).
pub fn read_gguf(path: &Path) -> Result<Gguf, LayerError> {
    let (file, meta) = crate::input::open_regular(path).map_err(|e| e.at(path))?;
    let len = meta.len();
    parse::header(BufReader::new(file), len).map_err(|m| LayerError::Gguf {
        path: path.to_owned(),
        reason: format!("{} (at byte {})", m.reason, m.at),
    })
}

/// The header of a GGUF file held in `bytes`, or why it is refused (the reason, and the byte
/// where the bad field starts).
pub fn parse_gguf(bytes: &[u8]) -> Result<Gguf, (String, u64)> {
    parse::header(bytes, bytes.len() as u64).map_err(|m| (m.reason, m.at))
}
