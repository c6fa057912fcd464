//! The GGUF header reader (`dtcast_layer::gguf`): every fixture read as gguf-py's own reader
//! reads it (`fixtures/gguf/reader.json`), and one test per malformed header, each refused with
//! its reason — never a panic, never an allocation the file's bytes cannot back.

use dtcast::layer::gguf::{parse_gguf, read_gguf, type_name, GgufValue, MAX_HEADER_BYTES};
use dtcast_tests::{fixture, fixture_path};
use serde_json::Value;

/// `value` as `scripts/gguf_reader_fixture.py` writes it: strings and floats as hex of their
/// bytes, integers and bools as JSON numbers and booleans, arrays as lists.
fn as_fixture(value: &GgufValue) -> Value {
    let hex = |b: &[u8]| Value::String(b.iter().map(|x| format!("{x:02x}")).collect());
    match value {
        GgufValue::U8(v) => (*v).into(),
        GgufValue::I8(v) => (*v).into(),
        GgufValue::U16(v) => (*v).into(),
        GgufValue::I16(v) => (*v).into(),
        GgufValue::U32(v) => (*v).into(),
        GgufValue::I32(v) => (*v).into(),
        GgufValue::U64(v) => (*v).into(),
        GgufValue::I64(v) => (*v).into(),
        GgufValue::F32(v) => hex(&v.to_le_bytes()),
        GgufValue::F64(v) => hex(&v.to_le_bytes()),
        GgufValue::Bool(v) => (*v).into(),
        GgufValue::String(b) => hex(b),
        GgufValue::Array(_, items) => Value::Array(items.iter().map(as_fixture).collect()),
    }
}

fn types_of(value: &GgufValue) -> Vec<String> {
    let mut types = vec![type_name(value.type_id()).unwrap().to_owned()];
    if let GgufValue::Array(kind, _) = value {
        types.push(type_name(*kind).unwrap().to_owned());
    }
    types
}

#[test]
fn every_fixture_reads_as_gguf_py_reads_it() {
    let reference = fixture("gguf/reader.json");
    let files = reference["files"].as_object().unwrap();
    assert!(files.len() >= 25, "{} files", files.len());
    for (name, want) in files {
        let gguf = read_gguf(&fixture_path(&format!("gguf/{name}"))).unwrap();
        assert_eq!(u64::from(gguf.version), want["version"], "{name}");
        assert_eq!(gguf.alignment, want["alignment"], "{name}");
        assert_eq!(gguf.data_start, want["data_offset"], "{name}");
        let meta = want["metadata"].as_array().unwrap();
        assert_eq!(gguf.metadata.len(), meta.len(), "{name}");
        for ((key, value), want) in gguf.metadata.iter().zip(meta) {
            assert_eq!(key, &want["key"], "{name}");
            let types: Vec<Value> = types_of(value).into_iter().map(Value::from).collect();
            assert_eq!(Value::Array(types), want["types"], "{name} {key}");
            assert_eq!(as_fixture(value), want["value"], "{name} {key}");
        }
        let tensors = want["tensors"].as_array().unwrap();
        assert_eq!(gguf.tensors.len(), tensors.len(), "{name}");
        for (t, want) in gguf.tensors.iter().zip(tensors) {
            assert_eq!(t.name, want["name"], "{name}");
            assert_eq!(t.ggml.name(), want["type"], "{name} {}", t.name);
            assert_eq!(
                serde_json::json!(t.dims),
                want["shape"],
                "{name} {}",
                t.name
            );
            assert_eq!(t.elements(), want["elements"], "{name} {}", t.name);
            assert_eq!(t.bytes, want["bytes"], "{name} {}", t.name);
            assert_eq!(
                gguf.data_start + t.offset,
                want["offset"],
                "{name} {}",
                t.name
            );
        }
    }
}

/// A GGUF header written field by field.
#[derive(Default)]
struct Header(Vec<u8>);

impl Header {
    fn new(version: u32, tensors: u64, kvs: u64) -> Header {
        let mut h = Header(b"GGUF".to_vec());
        h.u32(version).u64(tensors).u64(kvs);
        h
    }
    fn u32(&mut self, v: u32) -> &mut Header {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Header {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn string(&mut self, s: &[u8]) -> &mut Header {
        self.u64(s.len() as u64);
        self.0.extend(s);
        self
    }
    /// A key with a UINT32 value.
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Header {
        self.string(key.as_bytes()).u32(4).u32(v)
    }
    /// A tensor entry.
    fn tensor(&mut self, name: &str, dims: &[u64], ggml: u32, offset: u64) -> &mut Header {
        self.string(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ggml).u64(offset)
    }
    /// The header padded to 32 bytes, then `data` bytes of data.
    fn with_data(&self, data: usize) -> Vec<u8> {
        let mut b = self.0.clone();
        b.resize(b.len().div_ceil(32) * 32 + data, 0);
        b
    }
}

/// The reason `bytes` is refused; it must contain `expect`.
fn refused(bytes: &[u8], expect: &str) {
    match parse_gguf(bytes) {
        Ok(g) => panic!("read, expected an error with {expect:?}: {g:?}"),
        Err((reason, _)) => assert!(reason.contains(expect), "{reason:?} lacks {expect:?}"),
    }
}

#[test]
fn a_valid_header_made_here_reads() {
    // The baseline every refusal below changes one thing of: an F32 [2, 8] and a Q8_0 [1, 32].
    let mut h = Header::new(3, 2, 1);
    h.kv_u32("general.alignment", 32);
    h.tensor("a", &[8, 2], 0, 0).tensor("b", &[32, 1], 8, 64);
    let gguf = parse_gguf(&h.with_data(64 + 34)).unwrap();
    assert_eq!(gguf.tensors[1].shape(), [1, 32]);
    assert_eq!((gguf.tensors[0].bytes, gguf.tensors[1].bytes), (64, 34));
}

#[test]
fn not_gguf() {
    refused(b"\x08\0\0\0\0\0\0\0{}", "not a GGUF file");
}

#[test]
fn version_one() {
    refused(&Header::new(1, 0, 0).with_data(0), "version 1");
}

#[test]
fn a_later_version() {
    refused(&Header::new(4, 0, 0).with_data(0), "GGUF version 4");
}

#[test]
fn big_endian() {
    refused(
        &Header::new(3u32.swap_bytes(), 0, 0).with_data(0),
        "big-endian",
    );
}

#[test]
fn every_cut_of_a_real_file_is_refused() {
    // Every cut before the last tensor's last byte (the file's end pads past it).
    let bytes = std::fs::read(fixture_path("gguf/Q4_K.gguf")).unwrap();
    let gguf = parse_gguf(&bytes).unwrap();
    let last = gguf.tensors.last().unwrap();
    let end = (gguf.data_start + last.offset + last.bytes) as usize;
    for n in 0..end {
        assert!(parse_gguf(&bytes[..n]).is_err(), "cut at {n}");
    }
    assert!(parse_gguf(&bytes[..end]).is_ok());
}

#[test]
fn more_metadata_than_the_file_holds() {
    refused(
        &Header::new(3, 0, u64::MAX).with_data(0),
        "metadata entries cannot fit",
    );
}

#[test]
fn more_tensors_than_the_file_holds() {
    refused(
        &Header::new(3, 1 << 40, 0).with_data(0),
        "tensors cannot fit",
    );
}

#[test]
fn a_string_longer_than_the_file() {
    let mut h = Header::new(3, 0, 1);
    h.u64(u64::MAX);
    refused(&h.with_data(64), "runs past the end of the file");
}

#[test]
fn a_header_larger_than_the_cap() {
    let mut h = Header::new(3, 0, 1);
    h.u64(MAX_HEADER_BYTES + 1);
    refused(&h.with_data(MAX_HEADER_BYTES as usize + 64), "larger than");
}

#[test]
fn an_array_longer_than_the_file() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"k").u32(9).u32(4).u64(1 << 40);
    refused(
        &h.with_data(0),
        "an array of 1099511627776 UINT32 runs past",
    );
}

#[test]
fn arrays_nested_too_deep() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"k").u32(9);
    for _ in 0..9 {
        h.u32(9).u64(1);
    }
    h.u32(4).u64(0);
    refused(&h.with_data(0), "nested over 8 deep");
}

#[test]
fn a_duplicate_key() {
    let mut h = Header::new(3, 0, 2);
    h.kv_u32("k", 1).kv_u32("k", 2);
    refused(&h.with_data(0), "`k` appears twice");
}

#[test]
fn a_key_that_is_not_utf8() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"\xff").u32(4).u32(0);
    refused(&h.with_data(0), "not UTF-8");
}

#[test]
fn an_unknown_value_type() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"k").u32(13).u32(0);
    refused(&h.with_data(0), "value type 13");
}

#[test]
fn a_bool_that_is_not_0_or_1() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"k").u32(7);
    h.0.push(2);
    refused(&h.with_data(0), "a bool of 2");
}

#[test]
fn an_alignment_that_is_not_a_power_of_two() {
    let mut h = Header::new(3, 0, 1);
    h.kv_u32("general.alignment", 48);
    refused(&h.with_data(0), "UINT32 power of two");
}

#[test]
fn an_alignment_of_another_type() {
    let mut h = Header::new(3, 0, 1);
    h.string(b"general.alignment").u32(10).u64(32);
    refused(&h.with_data(0), "UINT64");
}

#[test]
fn a_duplicate_tensor_name() {
    let mut h = Header::new(3, 2, 0);
    h.tensor("a", &[8], 0, 0).tensor("a", &[8], 0, 32);
    refused(&h.with_data(64), "`a` appears twice");
}

#[test]
fn no_dimensions_or_too_many() {
    for dims in [&[][..], &[1, 1, 1, 1, 1]] {
        let mut h = Header::new(3, 1, 0);
        h.tensor("a", dims, 0, 0);
        refused(&h.with_data(64), "dimensions (1 to 4)");
    }
}

#[test]
fn an_unknown_ggml_type() {
    let mut h = Header::new(3, 1, 0);
    h.tensor("a", &[8], 4, 0);
    refused(&h.with_data(64), "ggml type 4, which is not one of");
}

#[test]
fn rows_that_are_not_whole_blocks() {
    let mut h = Header::new(3, 1, 0);
    h.tensor("a", &[48], 2, 0);
    refused(&h.with_data(64), "not whole Q4_0 blocks of 32");
}

#[test]
fn more_elements_than_memory() {
    let mut h = Header::new(3, 1, 0);
    h.tensor("a", &[1 << 32, 1 << 32, 2], 0, 0);
    refused(&h.with_data(64), "more elements than memory can hold");
}

#[test]
fn a_misaligned_offset() {
    let mut h = Header::new(3, 2, 0);
    h.tensor("a", &[8], 0, 0).tensor("b", &[8], 0, 33);
    refused(&h.with_data(96), "not a multiple of the alignment 32");
}

#[test]
fn tensors_out_of_order() {
    let mut h = Header::new(3, 2, 0);
    h.tensor("a", &[8], 0, 32).tensor("b", &[8], 0, 0);
    refused(&h.with_data(64), "but the tensors before it end at 0");
}

#[test]
fn a_tensor_past_the_end() {
    let mut h = Header::new(3, 1, 0);
    h.tensor("a", &[16], 0, 0);
    refused(&h.with_data(63), "runs past the end of the file");
}

#[test]
fn inspect_prints_a_gguf_file() {
    let file = fixture_path("gguf/Q4_K.gguf");
    let o = dtcast_tests::dtcast_cli(&["inspect", file.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    // gguf-py's reader: 3 × 512 + 5 × 1024 Q4_K, 512 F32 and 4 I32 elements; Q4_K's 3744
    // bytes (reader.json).
    for line in [
        "GGUF version 3, 4 tensors, 11 metadata entries, data aligned to 32 bytes",
        "architecture llama, 7,172 parameters",
        "metadata general.name = \"dtcast test ✓ é\"",
        "metadata test.u64 = 9223372036854775813",
        "metadata test.f64 = 1e-300",
        "metadata tokenizer.ggml.tokens = [\"<s>\", \"</s>\", \"▁a\", \"中\"]",
        "blk.0.ffn_down.weight   Q4_K     [5, 1024]                      2880",
        "Q4_K                2 tensors             3744 bytes",
    ] {
        assert!(o.stdout.contains(line), "{line:?} not in\n{}", o.stdout);
    }
}

#[test]
fn inspect_escapes_what_a_gguf_file_names() {
    let mut h = Header::new(3, 1, 1);
    h.string(b"k\x1b[2J").u32(8).string(b"v\x1b]0;x\x07");
    h.tensor("t\x1b[31m", &[8], 0, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("escapes.gguf");
    std::fs::write(&path, h.with_data(32)).unwrap();
    let o = dtcast_tests::dtcast_cli(&["inspect", path.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        !o.stdout.contains('\x1b') && !o.stdout.contains('\x07'),
        "{:?}",
        o.stdout
    );
    assert!(o.stdout.contains("t\\u{1b}[31m"), "{}", o.stdout);
}

#[test]
fn a_malformed_gguf_file_is_refused_by_inspect_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.gguf");
    std::fs::write(&path, b"GGUF\x03\0\0\0").unwrap();
    let o = dtcast_tests::dtcast_cli(&["inspect", path.to_str().unwrap()], "");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(
        o.stderr
            .contains("not a valid GGUF file: the tensor count of 8 bytes runs past"),
        "{}",
        o.stderr
    );
}

#[test]
fn convert_says_it_does_not_convert_gguf_yet() {
    let file = fixture_path("gguf/Q8_0.gguf");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.safetensors");
    let args = [
        "convert",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--dtype",
        "bf16",
    ];
    let o = dtcast_tests::dtcast_cli(&args, "");
    assert_eq!(o.code, 1, "{}", o.stdout);
    let said = "not a valid safetensors file: it is a GGUF file (llama.cpp's format; `dtcast \
                inspect` reads it)";
    assert!(o.stderr.contains(said), "{}", o.stderr);
    assert!(!out.exists());
}
