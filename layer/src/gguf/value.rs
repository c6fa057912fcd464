//! GGUF's metadata values: thirteen types, an array holding any one of them (arrays too).

use core::fmt;

use crate::text::escape;

/// A metadata value as stored (strings as their bytes: GGUF says UTF-8, files do not always
/// keep to it, and nothing read is lost).
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// `UINT8`.
    U8(u8),
    /// `INT8`.
    I8(i8),
    /// `UINT16`.
    U16(u16),
    /// `INT16`.
    I16(i16),
    /// `UINT32`.
    U32(u32),
    /// `INT32`.
    I32(i32),
    /// `FLOAT32`.
    F32(f32),
    /// `BOOL`.
    Bool(bool),
    /// `STRING`: its bytes.
    String(Vec<u8>),
    /// `ARRAY`: the element type's id, then the elements.
    Array(u32, Vec<GgufValue>),
    /// `UINT64`.
    U64(u64),
    /// `INT64`.
    I64(i64),
    /// `FLOAT64`.
    F64(f64),
}

/// Each value type's id and name (the GGUF specification's `gguf_metadata_value_type`), and its
/// size where fixed.
pub(crate) const TYPES: [(u32, &str, Option<usize>); 13] = [
    (0, "UINT8", Some(1)),
    (1, "INT8", Some(1)),
    (2, "UINT16", Some(2)),
    (3, "INT16", Some(2)),
    (4, "UINT32", Some(4)),
    (5, "INT32", Some(4)),
    (6, "FLOAT32", Some(4)),
    (7, "BOOL", Some(1)),
    (8, "STRING", None),
    (9, "ARRAY", None),
    (10, "UINT64", Some(8)),
    (11, "INT64", Some(8)),
    (12, "FLOAT64", Some(8)),
];

/// The name of value type `id` (`"UINT32"`), if it is one.
pub fn type_name(id: u32) -> Option<&'static str> {
    TYPES.iter().find(|t| t.0 == id).map(|t| t.1)
}

impl GgufValue {
    /// The value's type id.
    pub fn type_id(&self) -> u32 {
        match self {
            GgufValue::U8(_) => 0,
            GgufValue::I8(_) => 1,
            GgufValue::U16(_) => 2,
            GgufValue::I16(_) => 3,
            GgufValue::U32(_) => 4,
            GgufValue::I32(_) => 5,
            GgufValue::F32(_) => 6,
            GgufValue::Bool(_) => 7,
            GgufValue::String(_) => 8,
            GgufValue::Array(..) => 9,
            GgufValue::U64(_) => 10,
            GgufValue::I64(_) => 11,
            GgufValue::F64(_) => 12,
        }
    }

    /// A string value's text (lossy where its bytes are not UTF-8).
    pub fn as_text(&self) -> Option<String> {
        match self {
            GgufValue::String(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }
}

/// Values as `dtcast inspect` prints them: strings quoted with control characters escaped;
/// arrays of more than a few elements summarised by count and element type.
impl fmt::Display for GgufValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufValue::U8(v) => write!(f, "{v}"),
            GgufValue::I8(v) => write!(f, "{v}"),
            GgufValue::U16(v) => write!(f, "{v}"),
            GgufValue::I16(v) => write!(f, "{v}"),
            GgufValue::U32(v) => write!(f, "{v}"),
            GgufValue::I32(v) => write!(f, "{v}"),
            GgufValue::F32(v) => write!(f, "{v:?}"),
            GgufValue::Bool(v) => write!(f, "{v}"),
            GgufValue::String(b) => write!(f, "\"{}\"", escape(&String::from_utf8_lossy(b))),
            GgufValue::Array(kind, items) if items.len() > 8 => {
                let name = type_name(*kind).unwrap_or("?").to_lowercase();
                let kind = if *kind == 8 {
                    "strings".to_owned()
                } else {
                    format!("{name}s")
                };
                write!(f, "{} {kind}", group_thousands(items.len() as u64))
            }
            GgufValue::Array(_, items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            GgufValue::U64(v) => write!(f, "{v}"),
            GgufValue::I64(v) => write!(f, "{v}"),
            GgufValue::F64(v) => write!(f, "{v:?}"),
        }
    }
}

/// `151936` as `151,936`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_escaped_and_long_arrays_summarised() {
        let tokens = GgufValue::Array(8, vec![GgufValue::String(b"a".to_vec()); 151_936]);
        assert_eq!(tokens.to_string(), "151,936 strings");
        let control = GgufValue::String(b"x\x1b[2Jy".to_vec());
        assert!(!control.to_string().contains('\x1b'), "{control}");
        let ints = GgufValue::Array(5, vec![GgufValue::I32(1), GgufValue::I32(-2)]);
        assert_eq!(ints.to_string(), "[1, -2]");
    }
}
