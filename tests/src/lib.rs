//! Shared helpers for dtcast's test suite: loading the reference fixtures.
//!
//! The fixtures in `tests/fixtures/` were produced by running real torch 2.15.0 and jax 0.10.2
//! (see `fixtures/README.md`); they are copied into the repository so the tests need neither.

use std::path::PathBuf;

pub mod child;
pub mod cuda_host;
pub mod fuzz;

use dtcast::DType;
use serde_json::Value;

/// The path of a fixture file.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A fixture, parsed (decompressed first when its name ends in `.gz`).
///
/// # Panics
/// If the file is missing or is not JSON: the suite cannot run without its fixtures.
pub fn fixture(name: &str) -> Value {
    let path = fixture_path(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut text = String::new();
    if name.ends_with(".gz") {
        use std::io::Read;
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap_or_else(|e| panic!("decompressing {}: {e}", path.display()));
    } else {
        text = String::from_utf8(bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The rows of a fixture that is a JSON array (or an object with a `rows` array).
pub fn rows(name: &str) -> Vec<Value> {
    match fixture(name) {
        Value::Array(rows) => rows,
        Value::Object(mut o) => match o.remove("rows") {
            Some(Value::Array(rows)) => rows,
            _ => panic!("{name}: no `rows` array"),
        },
        _ => panic!("{name}: not an array"),
    }
}

/// A dtype named in a fixture (torch's python name, possibly with a `torch.` prefix).
pub fn dtype(v: &Value) -> DType {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("not a dtype name: {v}"));
    s.parse()
        .unwrap_or_else(|e| panic!("fixture dtype {s}: {e}"))
}

/// What a fixture expects: a value, or an error with torch's / jax's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected<T> {
    /// A successful result.
    Ok(T),
    /// An error; the message after `error: `.
    Err(String),
}

/// Reads an expected dtype or `"error: ..."`.
pub fn expected_dtype(v: &Value) -> Expected<DType> {
    match v.as_str() {
        Some(s) => match s.strip_prefix("error: ") {
            Some(msg) => Expected::Err(msg.to_owned()),
            None => Expected::Ok(dtype(v)),
        },
        None => panic!("expected a dtype or an error: {v}"),
    }
}

/// Compares a result with a policy fixture's expectation — a dtype exactly, an error as an error
/// (the text is the reference library's own) — and records a mismatch in `failures`.
pub fn record_mismatch<E: std::fmt::Debug>(
    failures: &mut Vec<String>,
    what: String,
    got: Result<DType, E>,
    want: &Expected<DType>,
    reference: &str,
) {
    match (&got, want) {
        (Ok(g), Expected::Ok(w)) if g == w => {}
        (Err(_), Expected::Err(_)) => {}
        _ => failures.push(format!("{what}: {reference} {want:?}, dtcast {got:?}")),
    }
}

/// Runs `policy` over `promote_types` rows (`[a, b, result]`): (rows, mismatches).
pub fn promote_type_rows(
    policy: &dyn dtcast::Policy,
    rows: &[Value],
    reference: &str,
) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for r in rows {
        let (a, b) = (dtype(&r[0]), dtype(&r[1]));
        let what = format!("promote_types({a}, {b})");
        let got = policy.promote_types(a, b);
        record_mismatch(&mut failures, what, got, &expected_dtype(&r[2]), reference);
    }
    (rows.len(), failures)
}

/// Runs `policy` over `result_type` rows (`[[operand, ...], result]`), each operand read by
/// `operand`: (rows, mismatches).
pub fn result_type_rows(
    policy: &dyn dtcast::Policy,
    rows: &[Value],
    reference: &str,
    operand: &dyn Fn(&str) -> dtcast::Operand,
) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for r in rows {
        let ops: Vec<dtcast::Operand> = r[0]
            .as_array()
            .unwrap_or_else(|| panic!("not a list of operands: {}", r[0]))
            .iter()
            .map(|o| operand(o.as_str().expect("an operand")))
            .collect();
        let what = format!("result_type({})", r[0]);
        let got = policy.result_type(&ops);
        record_mismatch(&mut failures, what, got, &expected_dtype(&r[1]), reference);
    }
    (rows.len(), failures)
}

/// The Python scalar kinds of `dtype`'s category or a lower one (bool aside), which a weak
/// scalar policy must not let widen an array of `dtype`: int for integers; int and float for
/// floats; int, float and complex for complex types.
pub fn weaker_scalar_kinds(dtype: DType) -> &'static [dtcast::ScalarKind] {
    use dtcast::ScalarKind::{Complex, Float, Int};
    if dtype.is_complex() {
        &[Int, Float, Complex]
    } else if dtype.is_floating_point() {
        &[Int, Float]
    } else if dtype.is_integral(false) {
        &[Int]
    } else {
        &[]
    }
}

/// Asserts that a fixture had rows and that none of them differed from `reference`.
pub fn assert_conforms(name: &str, reference: &str, (total, failures): (usize, Vec<String>)) {
    assert!(total > 0, "{name}: no rows");
    assert!(
        failures.is_empty(),
        "{name}: {} of {total} rows differ from {reference}:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// Reads a shape (`[2, 3]`).
pub fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a shape: {v}"))
        .iter()
        .map(|d| {
            d.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .unwrap_or_else(|| panic!("bad dim {d}"))
        })
        .collect()
}

/// Reads an expected shape or `"error: ..."`.
pub fn expected_shape(v: &Value) -> Expected<Vec<usize>> {
    match v.as_str() {
        Some(s) => Expected::Err(s.strip_prefix("error: ").unwrap_or(s).to_owned()),
        None => Expected::Ok(shape(v)),
    }
}

/// A tensor as [`read_sorted`] gives it: name, dtype, shape, bytes.
pub type NamedTensor = (String, DType, Vec<usize>, Vec<u8>);

/// Every tensor of a safetensors file, sorted by name.
pub fn read_sorted(path: &std::path::Path) -> Vec<NamedTensor> {
    let c = dtcast::layer::checkpoint::Checkpoint::open(path).unwrap();
    let mut v: Vec<NamedTensor> = (c.entries().iter())
        .map(|e| {
            (
                e.name.clone(),
                e.dtype,
                e.shape.to_vec(),
                c.read(e).unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Every file under `dir` (recursively, hidden ones included) with its bytes: two snapshots are
/// equal when the tree is byte for byte the same.
///
/// # Panics
/// If the tree cannot be read.
pub fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("readable directory") {
            let path = entry.expect("directory entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            if meta.is_dir() {
                todo.push(path.clone());
                out.insert(path, b"<dir>".to_vec());
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// A file `dir/name` with `header` as its safetensors JSON header and `data` after it (any
/// header, valid or not), whose path is returned.
///
/// # Panics
/// If it cannot be written.
pub fn file_with(dir: &std::path::Path, name: &str, header: &str, data: &[u8]) -> PathBuf {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("file written");
    p
}

/// A float32 checkpoint at `path` with one tensor per `(name, values)`.
///
/// # Panics
/// If it cannot be written.
pub fn write_f32_checkpoint(path: &std::path::Path, tensors: &[(&str, Vec<f32>)]) {
    let list: Vec<(String, dtcast::Tensor)> = tensors
        .iter()
        .map(|(n, v)| {
            (
                (*n).to_owned(),
                dtcast::Tensor::from_vec(v.clone(), &[v.len()]).expect("a tensor"),
            )
        })
        .collect();
    dtcast::layer::checkpoint::save(path, &list, &[]).expect("checkpoint written");
}

/// A sharded checkpoint in `dir`: `model-0000K-of-0000N.safetensors` per shard and
/// `model.safetensors.index.json`, whose path is returned.
///
/// # Panics
/// If it cannot be written.
pub fn write_sharded(dir: &std::path::Path, shards: &[Vec<(&str, Vec<f32>)>]) -> PathBuf {
    let n = shards.len();
    let mut map = serde_json::Map::new();
    for (k, tensors) in shards.iter().enumerate() {
        let file = format!("model-{:05}-of-{n:05}.safetensors", k + 1);
        write_f32_checkpoint(&dir.join(&file), tensors);
        for (name, _) in tensors {
            map.insert((*name).to_owned(), Value::from(file.clone()));
        }
    }
    let index = dir.join("model.safetensors.index.json");
    let json = serde_json::json!({ "metadata": { "total_size": 0 }, "weight_map": map });
    std::fs::write(&index, json.to_string()).expect("index written");
    index
}

/// What an in-process `dtcast` run printed and returned.
#[derive(Debug)]
pub struct CliOutput {
    /// The exit status.
    pub code: u8,
    /// Everything written to stdout.
    pub stdout: String,
    /// Everything written to stderr.
    pub stderr: String,
}

/// Runs `dtcast ARGS` in-process (`dtcast::cli::run`) with `stdin` as its input.
///
/// # Panics
/// If the tool writes text that is not UTF-8.
pub fn dtcast_cli(args: &[&str], stdin: &str) -> CliOutput {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = std::iter::once("dtcast").chain(args.iter().copied());
    let code = dtcast::cli::run(argv, &mut stdin.as_bytes(), &mut out, &mut err);
    CliOutput {
        code,
        stdout: String::from_utf8(out).expect("utf-8"),
        stderr: String::from_utf8(err).expect("utf-8"),
    }
}

/// Bytes from the hex the fixtures write (`"0000803f"`).
///
/// # Panics
/// On a character that is not a hex digit: the fixture is broken.
pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// `len` bytes of xorshift64 bits from `seed` (nonzero): reproducible noise for property tests.
pub fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend(seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `file`'s tensors in two shards in `dir` (those for which `first` holds, by name, then the
/// rest; each in name order) with a `model.safetensors.index.json` naming them; the index's path.
pub fn two_shards(
    file: &std::path::Path,
    dir: &std::path::Path,
    first: impl Fn(&str) -> bool,
) -> PathBuf {
    use dtcast::layer::checkpoint::{load_map, save};
    let all = load_map(file).unwrap();
    let mut names: Vec<&String> = all.keys().collect();
    names.sort();
    let (first, second): (Vec<&String>, Vec<&String>) = names.into_iter().partition(|n| first(n));
    let mut weight_map = serde_json::Map::new();
    for (name, part) in [
        ("model-00001-of-00002.safetensors", &first),
        ("model-00002-of-00002.safetensors", &second),
    ] {
        let tensors: Vec<(String, dtcast::Tensor)> = part
            .iter()
            .map(|n| ((*n).clone(), all[*n].clone()))
            .collect();
        save(dir.join(name), &tensors, &[]).unwrap();
        for n in part {
            weight_map.insert((*n).clone(), name.into());
        }
    }
    let index = dir.join("model.safetensors.index.json");
    let json = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": weight_map});
    std::fs::write(&index, json.to_string()).unwrap();
    index
}
