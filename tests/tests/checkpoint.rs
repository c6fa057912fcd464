//! safetensors checkpoints: round trips, streaming conversion, shards, atomic writes, and bad
//! input (one hand-made file per error class, plus mutated files that must never panic).

use std::path::{Path, PathBuf};

use dtcast::cast::{cast_to_vec, CastMode};
use dtcast::layer::checkpoint::{
    convert_file, convert_index, load_map, save, Checkpoint, ConvertOptions,
};
use dtcast::{DType, LayerError, Tensor};
use dtcast_tests::file_with;
use proptest::prelude::*;

fn sample() -> Vec<(String, Tensor)> {
    vec![
        (
            "z.last".to_owned(),
            Tensor::from_vec(vec![1.5f32, -2.0, 1e-3], &[3]).unwrap(),
        ),
        (
            "a.first".to_owned(),
            Tensor::from_vec(vec![0.1f64, 65536.5], &[2, 1]).unwrap(),
        ),
        (
            "ids".to_owned(),
            Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap(),
        ),
        (
            "mask".to_owned(),
            Tensor::from_vec(vec![true, false], &[2]).unwrap(),
        ),
        (
            "norm.weight".to_owned(),
            Tensor::from_vec(vec![1.0f32; 4], &[2, 2]).unwrap(),
        ),
    ]
}

fn meta() -> Vec<(String, String)> {
    vec![("format".to_owned(), "pt".to_owned())]
}

fn write_sample(dir: &Path) -> PathBuf {
    let p = dir.join("in.safetensors");
    save(&p, &sample(), &meta()).unwrap();
    p
}

#[test]
fn save_then_load_keeps_names_order_values_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_sample(dir.path());
    let ck = Checkpoint::open(&p).unwrap();
    let names: Vec<&str> = ck.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["z.last", "a.first", "ids", "mask", "norm.weight"]);
    assert_eq!(ck.metadata(), meta().as_slice());
    let loaded = ck.load().unwrap();
    for ((n1, t1), (n2, t2)) in sample().iter().zip(&loaded) {
        assert_eq!(n1, n2);
        assert_eq!((t1.dtype(), t1.shape()), (t2.dtype(), t2.shape()));
        assert_eq!(t1.to_bytes().unwrap(), t2.to_bytes().unwrap());
    }
    assert_eq!(load_map(&p).unwrap().len(), 5);
}

#[test]
fn convert_streams_floating_tensors_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_sample(dir.path());
    let out = dir.path().join("out.safetensors");
    let mut opts = ConvertOptions::new(DType::BFloat16);
    opts.keep = vec!["norm.*".to_owned()];
    let s = convert_file(&p, &out, &opts, &|_, _| {}).unwrap();
    assert_eq!((s.converted, s.kept), (2, 3));
    let ck = Checkpoint::open(&out).unwrap();
    let got: Vec<(String, DType)> = ck
        .entries()
        .iter()
        .map(|e| (e.name.clone(), e.dtype))
        .collect();
    assert_eq!(
        got,
        [
            ("z.last".to_owned(), DType::BFloat16),
            ("a.first".to_owned(), DType::BFloat16),
            ("ids".to_owned(), DType::Int64),
            ("mask".to_owned(), DType::Bool),
            ("norm.weight".to_owned(), DType::Float32),
        ]
    );
    assert_eq!(ck.metadata(), meta().as_slice());
    // The values are the cast crate's (torch's) values.
    let src = Checkpoint::open(&p).unwrap();
    for (a, b) in src.entries().iter().zip(ck.entries()) {
        let want = if a.dtype == b.dtype {
            src.read(a).unwrap()
        } else {
            cast_to_vec(&src.read(a).unwrap(), a.dtype, b.dtype, CastMode::Torch).unwrap()
        };
        assert_eq!(ck.read(b).unwrap(), want, "{}", a.name);
    }
    // --all converts integer and bool tensors too.
    let mut all = ConvertOptions::new(DType::Float16);
    all.all = true;
    all.force = true;
    let s = convert_file(&p, &out, &all, &|_, _| {}).unwrap();
    assert_eq!((s.converted, s.kept), (5, 0));
}

#[test]
fn outputs_are_never_half_written_or_overwritten_by_accident() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_sample(dir.path());
    let out = dir.path().join("out.safetensors");
    let opts = ConvertOptions::new(DType::BFloat16);
    assert!(
        matches!(convert_file(&p, &p, &opts, &|_, _| {}), Err(LayerError::Output(m)) if m.contains("refusing to overwrite the input"))
    );
    convert_file(&p, &out, &opts, &|_, _| {}).unwrap();
    let e = convert_file(&p, &out, &opts, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("exists; pass --force"), "{e}");
    // A conversion that fails half-way (Checked mode: 65536.5 overflows float16 in the 2nd tensor)
    // leaves the existing output as it was and no temporary file behind.
    let before = std::fs::read(&out).unwrap();
    let mut checked = ConvertOptions::new(DType::Float16);
    checked.mode = CastMode::Checked;
    checked.force = true;
    let e = convert_file(&p, &out, &checked, &|_, _| {}).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("tensor `a.first`: element 1 (65536.5) overflows float16"),
        "{e}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    // A dtype safetensors cannot store is an error naming the tensor.
    let e = convert_file(
        &p,
        &dir.path().join("c.safetensors"),
        &ConvertOptions::new(DType::Complex128),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(
        matches!(e, LayerError::Unstorable { ref name, dtype: DType::Complex128 } if name == "z.last"),
        "{e}"
    );
    assert!(!dir.path().join("c.safetensors").exists());
    // safetensors 0.8 has no name for ml_dtypes 0.7's float8_e5m3fnu: the error names the dtype
    // and what it does store.
    let e = convert_file(
        &p,
        &dir.path().join("c.safetensors"),
        &ConvertOptions::new(DType::Float8E5M3Fnu),
        &|_, _| {},
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(
            "would be float8_e5m3fnu, which safetensors cannot store (it stores bool, uint8"
        ),
        "{text}"
    );
    let stored = text.split("it stores").nth(1).unwrap();
    assert!(
        stored.contains("float8_e8m0fnu") && !stored.contains("float8_e5m3fnu"),
        "{text}"
    );
    assert!(!dir.path().join("c.safetensors").exists());
}

#[test]
fn sharded_checkpoints_convert_shard_by_shard_with_a_new_index() {
    let dir = tempfile::tempdir().unwrap();
    let t = sample();
    save(
        dir.path().join("model-00001-of-00002.safetensors"),
        &t[..2],
        &meta(),
    )
    .unwrap();
    save(
        dir.path().join("model-00002-of-00002.safetensors"),
        &t[2..],
        &meta(),
    )
    .unwrap();
    let index = dir.path().join("model.safetensors.index.json");
    let map: serde_json::Map<String, serde_json::Value> = t
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            (
                n.clone(),
                serde_json::Value::from(if i < 2 {
                    "model-00001-of-00002.safetensors"
                } else {
                    "model-00002-of-00002.safetensors"
                }),
            )
        })
        .collect();
    std::fs::write(
        &index,
        serde_json::json!({"metadata": {"total_size": 1}, "weight_map": map}).to_string(),
    )
    .unwrap();
    let out = dir.path().join("bf16");
    let s = convert_index(
        &index,
        &out,
        &ConvertOptions::new(DType::BFloat16),
        &|_, _| {},
    )
    .unwrap();
    let new: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("model.safetensors.index.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(new["metadata"]["total_size"], s.bytes_after);
    assert_eq!(new["weight_map"]["ids"], "model-00002-of-00002.safetensors");
    let sizes: u64 = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    .iter()
    .map(|f| {
        Checkpoint::open(out.join(f))
            .unwrap()
            .entries()
            .iter()
            .map(|e| e.range.len() as u64)
            .sum::<u64>()
    })
    .sum();
    assert_eq!(sizes, s.bytes_after);
    let bad = dir.path().join("bad.index.json");
    std::fs::write(&bad, r#"{"weight_map": {"x": "../escape.safetensors"}}"#).unwrap();
    assert!(convert_index(
        &bad,
        &out,
        &ConvertOptions::new(DType::BFloat16),
        &|_, _| {}
    )
    .is_err());
}

#[test]
fn corrupt_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            {
                let p = d.join("short");
                std::fs::write(&p, [1, 2, 3]).unwrap();
                p
            },
            "header",
        ),
        (
            {
                let p = d.join("huge");
                std::fs::write(&p, u64::MAX.to_le_bytes()).unwrap();
                p
            },
            "header",
        ),
        (
            {
                let p = d.join("trunc");
                std::fs::write(&p, 100u64.to_le_bytes()).unwrap();
                p
            },
            "header",
        ),
        (file_with(d, "json", "{not json", &[]), "header"),
        (
            file_with(
                d,
                "outside",
                r#"{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
                &[0; 8],
            ),
            "",
        ),
        (
            file_with(
                d,
                "overlap",
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                &[0; 12],
            ),
            "",
        ),
        (
            file_with(
                d,
                "dtype",
                r#"{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "",
        ),
        (
            file_with(
                d,
                "shape",
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                &[0; 8],
            ),
            "",
        ),
        (
            file_with(
                d,
                "f4",
                // safetensors 0.8 refuses an F4 tensor that ends inside a byte (fixtures/lowp).
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
                &[0; 2],
            ),
            "does not end at a byte boundary",
        ),
    ];
    for (path, needle) in cases {
        let e = Checkpoint::open(&path).unwrap_err().to_string();
        assert!(
            e.contains("not a valid safetensors file"),
            "{}: {e}",
            path.display()
        );
        assert!(e.contains(needle), "{}: {e}", path.display());
    }
    let e = Checkpoint::open(d.join("missing")).unwrap_err().to_string();
    assert!(e.contains("missing") && e.contains("No such file"), "{e}");
}

proptest! {
    // The fuzz of the reading path: mutations of a valid file (flipped bytes, truncation,
    // appended bytes) must give an error or a valid checkpoint, never a panic. 2,000 cases a run.
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn mutated_files_never_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6), cut in any::<prop::sample::Index>(), truncate in any::<bool>(), extra in proptest::collection::vec(any::<u8>(), 0..4)) {
        let dir = tempfile::tempdir().unwrap();
        let p = write_sample(dir.path());
        let mut bytes = std::fs::read(&p).unwrap();
        for (i, b) in flips {
            let k = i.index(bytes.len());
            bytes[k] ^= b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        bytes.extend(extra);
        std::fs::write(&p, &bytes).unwrap();
        if let Ok(ck) = Checkpoint::open(&p) {
            // Whatever passes validation must load: every tensor's bytes fill its shape.
            prop_assert!(ck.load().is_ok());
            let _ = convert_file(&p, &dir.path().join("o.safetensors"), &ConvertOptions::new(DType::BFloat16), &|_, _| {});
        }
    }
}

/// A file with a raw header length and raw header bytes.
fn raw_file(dir: &Path, name: &str, len: u64, header: &[u8], data: &[u8]) -> PathBuf {
    let mut bytes = len.to_le_bytes().to_vec();
    bytes.extend(header);
    bytes.extend(data);
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn the_reader_refuses_each_class_of_header_other_loaders_got_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let deep = format!(r#"{{"a":{}{}}}"#, "[".repeat(50_000), "]".repeat(50_000));
    let deep_metadata = format!(
        r#"{{"__metadata__":{{"k":{}{}}}}}"#,
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let cases: Vec<(PathBuf, &str)> = vec![
        // The cap is checked before anything is allocated (the file is 8 bytes long).
        (
            raw_file(d, "cap", 100_000_001, b"", b""),
            "the header length 100000001 exceeds the limit of 100000000 bytes",
        ),
        (
            raw_file(d, "past", 64, b"{}", b""),
            "the header length 64 runs past the end of the file (10 bytes)",
        ),
        (
            file_with(
                d,
                "dup",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "duplicate key `a`",
        ),
        (
            file_with(
                d,
                "dupfield",
                r#"{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "duplicate key `dtype`",
        ),
        (
            file_with(d, "dupmeta", r#"{"__metadata__":{"k":"1","k":"2"}}"#, &[]),
            "duplicate key `k`",
        ),
        (
            file_with(
                d,
                "meta-tensor",
                r#"{"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "a tensor is named `__metadata__`",
        ),
        (
            file_with(d, "meta-nonstring", r#"{"__metadata__":{"n":1}}"#, &[]),
            "`__metadata__` value of `n` is not a string",
        ),
        (
            file_with(
                d,
                "negative",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}"#,
                &[0; 4],
            ),
            "data_offsets is not a pair of non-negative integers",
        ),
        (
            file_with(
                d,
                "reversed",
                r#"{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}"#,
                &[0; 8],
            ),
            "data_offsets [8, 4] are reversed",
        ),
        (
            file_with(
                d,
                "wrapping",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551611,18446744073709551615]}}"#,
                &[0; 4],
            ),
            "overflow",
        ),
        (
            file_with(
                d,
                "beyond",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551616,18446744073709551620]}}"#,
                &[0; 4],
            ),
            "not a pair of non-negative integers",
        ),
        (
            file_with(
                d,
                "far",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4096,4100]}}"#,
                &[0; 4],
            ),
            "leaves a gap",
        ),
        (
            file_with(
                d,
                "size-overflow",
                r#"{"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "shape [4611686018427387904, 8] is too large: its element count is more than 2^63 - 1",
        ),
        (
            file_with(
                d,
                "dimension-past-i64",
                r#"{"a":{"dtype":"F32","shape":[0,9223372036854775808],"data_offsets":[0,0]}}"#,
                &[],
            ),
            "shape [0, 9223372036854775808] is too large: dimension 1 is more than 2^63 - 1",
        ),
        (
            file_with(
                d,
                "bytes-past-i64",
                r#"{"a":{"dtype":"F32","shape":[2305843009213693952,1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "shape [2305843009213693952, 1] of float32 is too large: its size in bytes is more than 2^63 - 1",
        ),
        (
            file_with(
                d,
                "trailing",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 5],
            ),
            "ends 1 bytes before the end of the file (trailing bytes)",
        ),
        (
            raw_file(d, "utf8", 8, b"{\"\xff\":{}}", b""),
            "not valid UTF-8",
        ),
        (
            file_with(
                d,
                "surrogate",
                r#"{"\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "surrogate",
        ),
        // Deep nesting where a tensor should be is refused at its first bracket; where it is
        // read past (a metadata value: serde_json skips it without recursing), at its end:
        // never a stack overflow.
        (file_with(d, "deep", &deep, &[]), "tensor `a` is not an object"),
        (
            file_with(d, "deep-metadata", &deep_metadata, &[]),
            "`__metadata__` value of `k` is not a string",
        ),
        (
            file_with(
                d,
                "unknown-field",
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}"#,
                &[0; 4],
            ),
            "unknown field `x`",
        ),
        (
            file_with(d, "not-object", "[1, 2]", &[]),
            "does not start with `{`",
        ),
        (
            file_with(d, "leading-space", " {}", &[]),
            "does not start with `{`",
        ),
        (
            file_with(
                d,
                "no-shape",
                r#"{"a":{"dtype":"F32","data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "tensor `a` has no `shape`",
        ),
        (
            file_with(
                d,
                "bad-dtype",
                r#"{"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}}"#,
                &[0; 4],
            ),
            "dtype `F99`, which is not a safetensors dtype",
        ),
    ];
    for (path, needle) in cases {
        let e = Checkpoint::open(&path).unwrap_err().to_string();
        assert!(
            e.contains("not a valid safetensors file"),
            "{}: {e}",
            path.display()
        );
        assert!(e.contains(needle), "{}: {e}", path.display());
        assert!(e.len() < 400, "messages stay short: {e}");
        // The in-memory validator (the fuzz target's) agrees.
        let bytes = std::fs::read(&path).unwrap();
        assert!(dtcast::layer::checkpoint::Header::from_bytes(&bytes).is_err());
    }
}

#[test]
fn legal_edge_cases_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Empty tensors (equal offsets), at the start and the end, beside a real one.
    let p = file_with(
        d,
        "empty",
        r#"{"e1":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"e2":{"dtype":"BF16","shape":[3,0],"data_offsets":[4,4]}}"#,
        &[0, 0, 0x80, 0x3f],
    );
    let ck = Checkpoint::open(&p).unwrap();
    let names: Vec<&str> = ck.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["e1", "a", "e2"]);
    let loaded = ck.load().unwrap();
    assert_eq!(loaded[2].1.shape(), [3, 0]);
    assert_eq!(loaded[1].1.to_vec::<f32>().unwrap(), [1.0]);
    // ...and convert.
    let out = d.join("out.safetensors");
    convert_file(&p, &out, &ConvertOptions::new(DType::Float16), &|_, _| {}).unwrap();
    assert_eq!(Checkpoint::open(&out).unwrap().entries().len(), 3);
    // A 0-dim tensor, an empty __metadata__, no tensors at all.
    let scalar = file_with(
        d,
        "scalar",
        r#"{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}"#,
        &[0; 8],
    );
    assert_eq!(
        Checkpoint::open(&scalar).unwrap().entries()[0].shape,
        Vec::<usize>::new()
    );
    let empty_meta = file_with(d, "meta", r#"{"__metadata__":{}}"#, &[]);
    let ck = Checkpoint::open(&empty_meta).unwrap();
    assert!(ck.entries().is_empty() && ck.metadata().is_empty());
    let none = file_with(d, "none", "{}        ", &[]);
    assert!(Checkpoint::open(&none).unwrap().entries().is_empty());
    let out = d.join("none-out.safetensors");
    convert_file(
        &none,
        &out,
        &ConvertOptions::new(DType::Float16),
        &|_, _| {},
    )
    .unwrap();
    assert!(Checkpoint::open(&out).unwrap().entries().is_empty());
}

/// A sharded checkpoint whose index is `weight_map`.
fn sharded_with_map(d: &Path, weight_map: &str) -> PathBuf {
    dtcast_tests::write_f32_checkpoint(
        &d.join("s1.safetensors"),
        &[("a", vec![1.0]), ("b", vec![2.0])],
    );
    dtcast_tests::write_f32_checkpoint(&d.join("s2.safetensors"), &[("c", vec![3.0])]);
    let index = d.join("model.safetensors.index.json");
    std::fs::write(
        &index,
        format!(r#"{{"metadata":{{}},"weight_map":{weight_map}}}"#),
    )
    .unwrap();
    index
}

#[test]
fn an_index_is_checked_against_its_shards_before_anything_is_written() {
    let good = r#"{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}"#;
    let cases = [
        (
            r#"{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}"#,
            "`weight_map` puts `b` in `s2.safetensors`, but it is in `s1.safetensors`",
        ),
        (
            r#"{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","z":"s2.safetensors"}"#,
            "`weight_map` puts `z` in `s2.safetensors`, but no shard holds it",
        ),
        (
            r#"{"a":"s1.safetensors","c":"s2.safetensors"}"#,
            "shard `s1.safetensors` holds `b`, which `weight_map` does not list",
        ),
        (
            r#"{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors","a":"s1.safetensors"}"#,
            "duplicate key `a`",
        ),
        (
            r#"{"a":"../s1.safetensors"}"#,
            "shard `../s1.safetensors` is not a plain file name",
        ),
        (
            r#"{"a":"/etc/passwd"}"#,
            "shard `/etc/passwd` is not a plain file name",
        ),
        (r#"{"a":"sub/s1.safetensors"}"#, "is not a plain file name"),
        (r#"{"a":".."}"#, "is not a plain file name"),
        (
            r#"{"a":7}"#,
            "maps `a` to something that is not a file name",
        ),
        (r#"[]"#, "no `weight_map` object"),
    ];
    for (map, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        let index = sharded_with_map(dir.path(), map);
        let out = dir.path().join("out");
        let e = convert_index(
            &index,
            &out,
            &ConvertOptions::new(DType::BFloat16),
            &|_, _| {},
        )
        .unwrap_err();
        assert!(matches!(e, LayerError::Index { .. }), "{map}: {e}");
        assert!(e.to_string().contains(needle), "{map}: {e}");
        assert!(!out.exists(), "{map}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "{map}: nothing written"
        );
    }
    // A tensor in two shards.
    let dir = tempfile::tempdir().unwrap();
    let index = sharded_with_map(dir.path(), good);
    dtcast_tests::write_f32_checkpoint(
        &dir.path().join("s2.safetensors"),
        &[("c", vec![3.0]), ("a", vec![9.0])],
    );
    let e = dtcast::layer::checkpoint::ShardedCheckpoint::open(&index).unwrap_err();
    assert!(
        e.to_string()
            .contains("tensor `a` is in two shards, `s1.safetensors` and `s2.safetensors`"),
        "{e}"
    );
    // The good one converts.
    let dir = tempfile::tempdir().unwrap();
    let index = sharded_with_map(dir.path(), good);
    let s = convert_index(
        &index,
        &dir.path().join("out"),
        &ConvertOptions::new(DType::BFloat16),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(s.converted, 3);
}

#[test]
fn a_sharded_output_directory_is_replaced_only_when_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let index = sharded_with_map(
        d,
        r#"{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}"#,
    );
    let out = d.join("out");
    let opts = ConvertOptions::new(DType::BFloat16);
    // An empty directory is fine without --force.
    std::fs::create_dir(&out).unwrap();
    convert_index(&index, &out, &opts, &|_, _| {}).unwrap();
    let e = convert_index(&index, &out, &opts, &|_, _| {}).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("exists; pass --force to replace it"),
        "{e}"
    );
    // A directory holding anything but checkpoint files is never replaced.
    std::fs::write(out.join("config.json"), "{}").unwrap();
    let mut forced = opts.clone();
    forced.force = true;
    let e = convert_index(&index, &out, &forced, &|_, _| {}).unwrap_err();
    assert!(
        e.to_string()
            .contains("holds files that are not part of a converted checkpoint (config.json)"),
        "{e}"
    );
    std::fs::remove_file(out.join("config.json")).unwrap();
    convert_index(&index, &out, &forced, &|_, _| {}).unwrap();
    // The input's own directory, or one that holds it, is refused.
    let e = convert_index(&index, d, &forced, &|_, _| {}).unwrap_err();
    assert!(e.to_string().contains("it holds the input"), "{e}");
    // A file where the directory should be.
    let e = convert_index(&index, &d.join("s1.safetensors"), &forced, &|_, _| {}).unwrap_err();
    assert!(
        e.to_string()
            .contains("it is a regular file; a sharded checkpoint is written as a directory"),
        "{e}"
    );
}

#[test]
fn a_checkpoint_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.safetensors");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Opening a FIFO for reading would wait for a writer forever; it is refused first.
    let e = Checkpoint::open(&fifo).unwrap_err().to_string();
    assert!(
        e.ends_with("it is a FIFO (named pipe), not a regular file"),
        "{e}"
    );
    let e = Checkpoint::open("/dev/null").unwrap_err().to_string();
    assert!(
        e.ends_with("it is a character device, not a regular file"),
        "{e}"
    );
}

#[test]
fn low_precision_checkpoints_store_packed_bytes_with_safetensors_shapes() {
    // float4 values of the OCP table, 8 per tensor: F4 in the header with the element shape
    // (safetensors 0.8: shape counts fp4 values), two per byte, the first in the low nibble.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("in.safetensors");
    let w = Tensor::from_vec(vec![1.0f32, 6.0, 0.5, -2.0, -0.0, 3.0, 4.0, 0.0], &[2, 4]).unwrap();
    let odd = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    save(&p, &[("w".to_owned(), w), ("odd".to_owned(), odd)], &meta()).unwrap();

    // A tensor whose elements end inside a byte is refused before anything is written...
    let out = dir.path().join("f4.safetensors");
    let e = convert_file(
        &p,
        &out,
        &ConvertOptions::new(DType::Float4E2M1Fn),
        &|_, _| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("--keep odd"), "{e}");
    assert!(!out.exists());
    // ...and kept as it is with --keep.
    let mut opts = ConvertOptions::new(DType::Float4E2M1Fn);
    opts.keep = vec!["odd".to_owned()];
    convert_file(&p, &out, &opts, &|_, _| {}).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert_eq!(header["w"]["dtype"], "F4");
    assert_eq!(header["w"]["shape"], serde_json::json!([2, 4]));
    let ck = Checkpoint::open(&out).unwrap();
    let w = &ck.entries()[0];
    assert_eq!(
        (w.dtype, w.shape.as_slice()),
        (DType::Float4E2M1Fn, &[2usize, 4][..])
    );
    // torch's nvfp4 packing of these values (fixtures/lowp/formats.json).
    assert_eq!(ck.read(w).unwrap(), [0x72, 0xC1, 0x58, 0x06]);

    // float6: four values in three bytes, F6_E2M3 in the header.
    let out6 = dir.path().join("f6.safetensors");
    let mut opts = ConvertOptions::new(DType::Float6E2M3Fn);
    opts.keep = vec!["odd".to_owned()];
    convert_file(&p, &out6, &opts, &|_, _| {}).unwrap();
    let ck6 = Checkpoint::open(&out6).unwrap();
    let w6 = &ck6.entries()[0];
    assert_eq!(w6.dtype, DType::Float6E2M3Fn);
    assert_eq!(ck6.read(w6).unwrap().len(), 6);
    let back = cast_to_vec(
        &ck6.read(w6).unwrap(),
        DType::Float6E2M3Fn,
        DType::Float32,
        CastMode::Torch,
    )
    .unwrap();
    let want: Vec<u8> = [1.0f32, 6.0, 0.5, -2.0, -0.0, 3.0, 4.0, 0.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(back, want);
}
