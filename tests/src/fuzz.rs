//! The bodies of the `cargo fuzz` targets (`fuzz/fuzz_targets/`), here so that the normal test
//! suite replays the committed corpus (`fuzz/corpus/`) through exactly the same code on stable.
//! Each takes arbitrary bytes, must not panic, and checks the laws its parser promises.

use dtcast::cast::CastMode;
use dtcast::layer::checkpoint::{Header, Index};
use dtcast::{DType, Policy, Torch};

/// A whole safetensors file: refused, or its tensors cover the data exactly, in order.
pub fn safetensors_header(data: &[u8]) {
    let Ok(h) = Header::from_bytes(data) else {
        return;
    };
    let mut at = h.data_start;
    for e in &h.entries {
        assert_eq!(e.range.start, at, "tensors are contiguous");
        let numel: usize = e.shape.iter().product();
        assert_eq!(
            Ok(e.range.len()),
            e.dtype.storage_bytes(numel),
            "size matches shape"
        );
        at = e.range.end;
    }
    assert_eq!(at, data.len(), "the data ends at the end of the file");
    assert!(h.entries.iter().all(|e| e.name != "__metadata__"));
}

/// An index file: refused, or every shard is a plain file name.
pub fn index(data: &[u8]) {
    let Ok(i) = Index::parse(data) else {
        return;
    };
    for s in &i.shards {
        assert!(!s.is_empty() && !s.contains('/') && s != ".." && s != ".");
    }
    assert!(i.weight_map.iter().all(|(_, s)| i.shards.contains(s)));
}

/// A dtype name: parsed and round-tripping, or refused with a one-line message.
pub fn dtype_name(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match text.parse::<DType>() {
        Ok(dt) => assert_eq!(dt.name().parse::<DType>(), Ok(dt)),
        Err(e) => {
            let m = e.to_string();
            assert!(!m.contains('\n') && m.len() < 400, "{m}");
        }
    }
}

/// One line of `dtcast promote` operands: each parses or is refused with one short line, and
/// promotion answers or errs, never panics.
pub fn promote_operands(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ops: Result<Vec<_>, _> = text
        .split_whitespace()
        .map(dtcast::cli::parse_operand)
        .collect();
    match ops {
        Ok(ops) if !ops.is_empty() => {
            let _ = Torch::default().result_type(&ops);
        }
        Ok(_) => {}
        Err(m) => assert!(!m.contains('\n') && m.len() < 500, "{m}"),
    }
}

/// `dtcast cast --hex` on arbitrary input, for a pair and mode picked by the first bytes: exit
/// 0 or 1 (never a panic), and on success one output token per input token.
pub fn cast_hex(data: &[u8]) {
    let [a, b, m, rest @ ..] = data else {
        return;
    };
    let from = DType::ALL[usize::from(*a) % DType::COUNT];
    let to = DType::ALL[usize::from(*b) % DType::COUNT];
    let mode = CastMode::ALL[usize::from(*m) % CastMode::ALL.len()];
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let args = [
        "dtcast",
        "cast",
        "--from",
        from.name(),
        "--to",
        to.name(),
        "--mode",
        mode.name(),
        "--hex",
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = dtcast::cli::run(args, &mut text.as_bytes(), &mut out, &mut err);
    assert!(code == 0 || code == 1, "exit {code}");
    if code == 0 {
        let tokens_in = text.split_whitespace().count();
        let out = String::from_utf8(out).expect("hex is text");
        assert_eq!(out.split_whitespace().count(), tokens_in);
    } else {
        assert!(err.len() < 400, "errors stay short: {} bytes", err.len());
    }
}

/// A fuzz target's body.
pub type Body = fn(&[u8]);

/// Every target: its name (the folder of its corpus) and its body.
pub const TARGETS: [(&str, Body); 5] = [
    ("safetensors_header", safetensors_header),
    ("index", index),
    ("dtype_name", dtype_name),
    ("promote_operands", promote_operands),
    ("cast_hex", cast_hex),
];
