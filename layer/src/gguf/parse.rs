//! The GGUF header, read front to back from a stream whose length is known: every count and
//! length is checked against the bytes left before anything of that size is allocated.

use std::io::Read;

use dtcast_quant::GgmlType;

use super::value::{type_name, GgufValue, TYPES};
use super::{Gguf, GgufTensor};

/// The most dimensions a ggml tensor has (`GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// How deep arrays of arrays may nest (the files people make nest one level).
const MAX_DEPTH: usize = 8;

/// The most bytes the header (metadata and tensor entries) may take. Real headers are a few to
/// a few tens of MiB (a tokenizer of 256K tokens and its merges); this bounds what a hostile
/// length can make dtcast allocate.
pub const MAX_HEADER_BYTES: u64 = 1 << 28;

/// The most metadata values (array elements included) a header may hold: a million or so in the
/// largest real ones; each takes a few dozen bytes in memory.
pub const MAX_VALUES: u64 = 1 << 23;

/// The alignment of the data when `general.alignment` does not say (`GGUF_DEFAULT_ALIGNMENT`).
pub(super) const DEFAULT_ALIGNMENT: u64 = 32;

/// Why a header is refused, and where (the byte offset where the bad field starts).
#[derive(Debug)]
pub(super) struct Malformed {
    pub(super) at: u64,
    pub(super) reason: String,
}

/// A reader of the stream's fields that knows how many bytes are left.
struct Cursor<R> {
    inner: R,
    at: u64,
    len: u64,
    values: u64,
}

impl<R: Read> Cursor<R> {
    fn fail<T>(&self, at: u64, reason: impl Into<String>) -> Result<T, Malformed> {
        Err(Malformed {
            at,
            reason: reason.into(),
        })
    }

    fn left(&self) -> u64 {
        self.len - self.at
    }

    /// `n` bytes, refused (before allocating) where fewer are left or the header would pass
    /// [`MAX_HEADER_BYTES`].
    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, Malformed> {
        if n <= self.left() && self.at + n > MAX_HEADER_BYTES {
            return self.fail(
                self.at,
                format!("{what} of {n} bytes would make the header larger than {MAX_HEADER_BYTES} bytes"),
            );
        }
        if n > self.left() {
            return self.fail(
                self.at,
                format!(
                    "{what} of {n} bytes runs past the end of the file ({} bytes left)",
                    self.left()
                ),
            );
        }
        let mut buf = vec![0u8; n as usize];
        if let Err(e) = self.inner.read_exact(&mut buf) {
            return self.fail(
                self.at,
                format!("reading {what}: {e} (was the file cut short?)"),
            );
        }
        self.at += n;
        Ok(buf)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Malformed> {
        let b = self.bytes(N as u64, what)?;
        Ok(b.try_into().unwrap_or([0; N]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, Malformed> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, Malformed> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn string(&mut self, what: &str) -> Result<Vec<u8>, Malformed> {
        let n = self.u64(&format!("the length of {what}"))?;
        self.bytes(n, what)
    }

    /// A UTF-8 string (keys and tensor names).
    fn text(&mut self, what: &str) -> Result<String, Malformed> {
        let at = self.at;
        let bytes = self.string(what)?;
        String::from_utf8(bytes).or_else(|_| self.fail(at, format!("{what} is not UTF-8")))
    }

    /// A value of type `kind`, arrays `depth` deep already.
    fn value(&mut self, kind: u32, depth: usize, what: &str) -> Result<GgufValue, Malformed> {
        let at = self.at;
        self.values += 1;
        if self.values > MAX_VALUES {
            return self.fail(at, format!("more than {MAX_VALUES} metadata values"));
        }
        Ok(match kind {
            0 => GgufValue::U8(self.array::<1>(what)?[0]),
            1 => GgufValue::I8(self.array::<1>(what)?[0] as i8),
            2 => GgufValue::U16(u16::from_le_bytes(self.array(what)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array(what)?)),
            4 => GgufValue::U32(self.u32(what)?),
            5 => GgufValue::I32(i32::from_le_bytes(self.array(what)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)?[0] {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                b => return self.fail(at, format!("{what}: a bool of {b} (0 or 1)")),
            },
            8 => GgufValue::String(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return self.fail(at, format!("{what}: arrays nested over {MAX_DEPTH} deep"));
                }
                let element = self.u32(&format!("the element type of {what}"))?;
                let Some(&(_, _, size)) = TYPES.iter().find(|t| t.0 == element) else {
                    return self.fail(at, unknown_type(what, element));
                };
                let count_at = self.at;
                let count = self.u64(&format!("the length of {what}"))?;
                // Each element takes at least its size, or a string's or array's length field.
                let least = size.unwrap_or(8) as u64;
                if count > self.left() / least {
                    return self.fail(
                        count_at,
                        format!(
                            "{what}: an array of {count} {} runs past the end of the file",
                            type_name(element).unwrap_or("?")
                        ),
                    );
                }
                let mut items = Vec::with_capacity(count.min(1 << 16) as usize);
                for _ in 0..count {
                    items.push(self.value(element, depth + 1, what)?);
                }
                GgufValue::Array(element, items)
            }
            10 => GgufValue::U64(self.u64(what)?),
            11 => GgufValue::I64(i64::from_le_bytes(self.array(what)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array(what)?)),
            other => return self.fail(at, unknown_type(what, other)),
        })
    }
}

fn unknown_type(what: &str, id: u32) -> String {
    let names: Vec<String> = TYPES.iter().map(|t| format!("{} {}", t.0, t.1)).collect();
    format!(
        "{what} has value type {id}; GGUF's are {}",
        names.join(", ")
    )
}

/// The header of a GGUF stream of `len` bytes, checked (see [`super`]).
pub(super) fn header(inner: impl Read, len: u64) -> Result<Gguf, Malformed> {
    let mut c = Cursor {
        inner,
        at: 0,
        len,
        values: 0,
    };
    let magic = c.array::<4>("the magic number")?;
    if &magic != b"GGUF" {
        return c.fail(0, "not a GGUF file (it does not start with \"GGUF\")");
    }
    let version = c.u32("the version")?;
    match version {
        2 | 3 => {}
        1 => {
            return c.fail(
                4,
                "GGUF version 1 (32-bit counts) is not read; versions 2 and 3 are",
            )
        }
        v if v.swap_bytes() <= 3 => {
            return c.fail(4, "a big-endian GGUF file; dtcast reads little-endian ones")
        }
        v => return c.fail(4, format!("GGUF version {v}; versions 2 and 3 are read")),
    }
    let tensor_count_at = c.at;
    let tensor_count = c.u64("the tensor count")?;
    let kv_count_at = c.at;
    let kv_count = c.u64("the metadata count")?;
    // A key-value pair takes at least 13 bytes (a key's length, a type, a one-byte value), a
    // tensor's entry at least 28 (a name's length, a dimension count, one dimension, a type, an
    // offset).
    if kv_count > c.left() / 13 {
        return c.fail(
            kv_count_at,
            format!("{kv_count} metadata entries cannot fit in the file"),
        );
    }
    if tensor_count > c.left() / 28 {
        return c.fail(
            tensor_count_at,
            format!("{tensor_count} tensors cannot fit in the file"),
        );
    }
    let mut metadata: Vec<(String, GgufValue)> = Vec::with_capacity(kv_count.min(1024) as usize);
    let mut keys = std::collections::HashSet::new();
    for i in 0..kv_count {
        let at = c.at;
        let key = c.text(&format!("metadata key {i}"))?;
        let kind = c.u32(&format!("the type of `{}`", crate::text::quote(&key, 80)))?;
        let value = c.value(kind, 0, &format!("`{}`", crate::text::quote(&key, 80)))?;
        if !keys.insert(key.clone()) {
            return c.fail(
                at,
                format!(
                    "the metadata key `{}` appears twice",
                    crate::text::quote(&key, 80)
                ),
            );
        }
        metadata.push((key, value));
    }
    let alignment = alignment(&metadata).map_err(|reason| Malformed { at: 0, reason })?;
    let mut tensors = Vec::with_capacity(tensor_count.min(1 << 14) as usize);
    let mut names = std::collections::HashSet::new();
    for i in 0..tensor_count {
        let at = c.at;
        let name = c.text(&format!("the name of tensor {i}"))?;
        let shown = crate::text::quote(&name, 80);
        if !names.insert(name.clone()) {
            return c.fail(at, format!("the tensor name `{shown}` appears twice"));
        }
        let dims_at = c.at;
        let n_dims = c.u32(&format!("the dimension count of `{shown}`"))?;
        if !(1..=MAX_DIMS).contains(&n_dims) {
            return c.fail(
                dims_at,
                format!("`{shown}` has {n_dims} dimensions (1 to {MAX_DIMS})"),
            );
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(c.u64(&format!("a dimension of `{shown}`"))?);
        }
        let type_at = c.at;
        let id = c.u32(&format!("the type of `{shown}`"))?;
        let Some(ggml) = GgmlType::from_id(id) else {
            let known: Vec<String> = GgmlType::all().map(|t| format!("{} {t}", t.id())).collect();
            return c.fail(
                type_at,
                format!(
                    "`{shown}` has ggml type {id}, which is not one of {}",
                    known.join(", ")
                ),
            );
        };
        let offset_at = c.at;
        let offset = c.u64(&format!("the data offset of `{shown}`"))?;
        let bytes = tensor_bytes(&dims, ggml).map_err(|reason| Malformed {
            at: dims_at,
            reason: format!("`{shown}`: {reason}"),
        })?;
        if !offset.is_multiple_of(alignment) {
            return c.fail(
                offset_at,
                format!("`{shown}` starts at data offset {offset}, not a multiple of the alignment {alignment}"),
            );
        }
        tensors.push(GgufTensor {
            name,
            ggml,
            dims,
            offset,
            bytes,
        });
    }
    let data_start = c.at.div_ceil(alignment) * alignment;
    // The data as llama.cpp lays it out and reads it: each tensor where the one before ends,
    // padded to the alignment, in the order listed, all within the file.
    let mut expected = 0u64;
    for t in &tensors {
        let shown = crate::text::quote(&t.name, 80);
        if t.offset != expected {
            return c.fail(
                data_start,
                format!(
                    "`{shown}` starts at data offset {}, but the tensors before it end at {expected} \
                     (GGUF lays tensors out in order, each padded to {alignment} bytes)",
                    t.offset
                ),
            );
        }
        let end = data_start
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.bytes))
            .filter(|&e| e <= len);
        if end.is_none() {
            return c.fail(
                data_start,
                format!(
                    "`{shown}` ({} bytes at data offset {}) runs past the end of the file ({len} bytes)",
                    t.bytes, t.offset
                ),
            );
        }
        expected = (t.offset + t.bytes).div_ceil(alignment) * alignment;
    }
    Ok(Gguf {
        version,
        alignment,
        metadata,
        tensors,
        data_start,
    })
}

/// `general.alignment` (a power of two, as a `UINT32`), or the default.
fn alignment(metadata: &[(String, GgufValue)]) -> Result<u64, String> {
    match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => Ok(DEFAULT_ALIGNMENT),
        Some((_, GgufValue::U32(a))) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some((_, v)) => Err(format!(
            "`general.alignment` is {v} ({}); it must be a UINT32 power of two",
            type_name(v.type_id()).unwrap_or("?")
        )),
    }
}

/// The bytes of a tensor of `dims` (innermost first) and type `ggml`, or why it has none.
fn tensor_bytes(dims: &[u64], ggml: GgmlType) -> Result<u64, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| usize::try_from(n).is_ok())
        .ok_or_else(|| format!("dimensions {dims:?} have more elements than memory can hold"))?;
    if !dims[0].is_multiple_of(ggml.block_elements() as u64) {
        return Err(format!(
            "its rows of {} elements are not whole {ggml} blocks of {}",
            dims[0],
            ggml.block_elements()
        ));
    }
    ggml.bytes_for(elements as usize)
        .map(|b| b as u64)
        .ok_or_else(|| format!("dimensions {dims:?} have more bytes than memory can hold"))
}
