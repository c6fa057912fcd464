//! Casts: conformance with torch 2.15 (`torch_cast.json`), the laws of the four modes, and
//! independent checks of Saturate / Checked / Exact.

use std::collections::BTreeMap;

use dtcast::cast::{cast, cast_to_vec, CastError, CastMode, ValueErrorKind};
use dtcast::DType;
use dtcast_tests::{dtype, fixture};
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every (source, destination, value) of the fixture: `(from, to, src bytes, torch's bytes)`.
fn torch_cases() -> Vec<(DType, DType, Vec<u8>, Vec<u8>)> {
    let Value::Array(sources) = fixture("torch_cast.json") else {
        panic!("torch_cast.json: not an array")
    };
    let mut cases = Vec::new();
    for s in &sources {
        let from = dtype(&s["src"]);
        let values: Vec<Vec<u8>> = s["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| hex(v.as_str().expect("hex")))
            .collect();
        for (to_name, t) in s["to"].as_object().expect("to") {
            let to: DType = to_name.parse().expect("dtype");
            for (v, out) in values.iter().zip(t["out"].as_array().expect("out")) {
                cases.push((from, to, v.clone(), hex(out.as_str().expect("hex"))));
            }
        }
    }
    cases
}

#[test]
fn torch_mode_matches_torch_byte_for_byte() {
    let cases = torch_cases();
    assert!(cases.len() > 100_000, "{} cases", cases.len());
    let mut failures: BTreeMap<(DType, DType), Vec<String>> = BTreeMap::new();
    for (from, to, src, want) in &cases {
        let got = cast_to_vec(src, *from, *to, CastMode::Torch).expect("torch mode never fails");
        if got != *want {
            failures.entry((*from, *to)).or_default().push(format!(
                "{} -> {} (torch {})",
                to_hex(src),
                to_hex(&got),
                to_hex(want)
            ));
        }
    }
    let report: Vec<String> = failures
        .iter()
        .map(|((f, t), v)| {
            format!(
                "{f} -> {t}: {} differ, e.g. {}",
                v.len(),
                v.iter().take(4).cloned().collect::<Vec<_>>().join("; ")
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} pairs differ from torch:\n{}",
        failures.len(),
        report.join("\n")
    );
}
