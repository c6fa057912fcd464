//! Casts: conformance with torch 2.15 (`torch_cast.json`), the laws of the four modes, and
//! independent checks of Saturate / Checked / Exact.

use std::collections::BTreeMap;

use dtcast::cast::{cast, cast_to_vec, CastError, CastMode, ValueErrorKind};
use dtcast::DType;
use dtcast_tests::{dtype, fixture, hex};
use serde_json::Value;

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

#[test]
fn torch_mode_matches_torch_on_whole_buffers() {
    // The same fixture values cast as one buffer per pair, so that the SIMD kernels of the hot pairs
    // (which leave fewer than a vector's worth of elements to the scalar rules) see them too.
    let mut by_pair: BTreeMap<(DType, DType), (Vec<u8>, Vec<u8>)> = BTreeMap::new();
    for (from, to, src, want) in torch_cases() {
        let entry = by_pair.entry((from, to)).or_default();
        entry.0.extend(src);
        entry.1.extend(want);
    }
    for ((from, to), (src, want)) in &by_pair {
        let got = cast_to_vec(src, *from, *to, CastMode::Torch).unwrap();
        let first_bad = got
            .chunks(to.byte_size().unwrap())
            .zip(want.chunks(to.byte_size().unwrap()))
            .position(|(g, w)| g != w);
        assert_eq!(first_bad, None, "{from} -> {to}");
    }
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn cast_f64(values: &[f64], to: DType, mode: CastMode) -> Result<Vec<u8>, CastError> {
    cast_to_vec(&f64s(values), DType::Float64, to, mode)
}

/// The value error of a failed cast: (index, kind).
fn value_error(r: Result<Vec<u8>, CastError>) -> (usize, ValueErrorKind) {
    match r {
        Err(CastError::Value { index, kind, .. }) => (index, kind),
        other => panic!("expected a value error, got {other:?}"),
    }
}

#[test]
fn saturate_clamps_float_to_int_like_xla() {
    // XLA's convert (shared reference §2): f32 -> i8 [nan, inf, -inf, 1e10, 3.7, -3.7] -> [0, 127, -128, 127, 3, -3].
    let src = f32s(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e10, 3.7, -3.7]);
    let out = cast_to_vec(&src, DType::Float32, DType::Int8, CastMode::Saturate).unwrap();
    assert_eq!(out, [0, 127, 128, 127, 3, 253]); // -128 and -3 as bytes
                                                 // unsigned: x <= 0 or NaN -> 0, >= max -> max.
    let src = f32s(&[-1.5, 300.5, f32::NAN, 254.9]);
    assert_eq!(
        cast_to_vec(&src, DType::Float32, DType::UInt8, CastMode::Saturate).unwrap(),
        [0, 255, 0, 254]
    );
    // Torch wraps instead (torch-semantics.md §5): 300 -> 44, -1 -> 255.
    let src = f32s(&[300.0, -1.0]);
    assert_eq!(
        cast_to_vec(&src, DType::Float32, DType::UInt8, CastMode::Torch).unwrap(),
        [44, 255]
    );
}

#[test]
fn saturate_rounds_once_where_torch_rounds_twice() {
    // torch-semantics.md §5 "Double rounding": torch's answers, and the correctly rounded ones.
    let bf16 = |x: f64, mode| {
        u16::from_le_bytes(
            cast_f64(&[x], DType::BFloat16, mode).unwrap()[..2]
                .try_into()
                .unwrap(),
        )
    };
    let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
    assert_eq!(bf16(x, CastMode::Torch), 0x3F80); // 1.0
    assert_eq!(bf16(x, CastMode::Saturate), 0x3F81); // 1.0078125
    let f16 = |x: f64, mode| {
        u16::from_le_bytes(
            cast_f64(&[x], DType::Float16, mode).unwrap()[..2]
                .try_into()
                .unwrap(),
        )
    };
    let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(f16(x, CastMode::Torch), 0x3C00);
    assert_eq!(f16(x, CastMode::Saturate), 0x3C01);
    let e4m3 = |x: f64, mode| cast_f64(&[x], DType::Float8E4M3Fn, mode).unwrap()[0];
    let x = 1.0 + 2f64.powi(-4) + 2f64.powi(-30);
    assert_eq!(e4m3(x, CastMode::Torch), 0x38); // 1.0
    assert_eq!(e4m3(x, CastMode::Saturate), 0x39); // 1.125
    let i = (1i64 << 40) + (1 << 32) + 1;
    let from_i64 =
        |mode| cast_to_vec(&i.to_le_bytes(), DType::Int64, DType::BFloat16, mode).unwrap();
    // 2^40 is 0x5380; 2^40 + 2^33 is 0x5381.
    assert_eq!(from_i64(CastMode::Torch), 0x5380u16.to_le_bytes());
    assert_eq!(from_i64(CastMode::Saturate), 0x5381u16.to_le_bytes());
}

#[test]
fn saturate_clamps_float8_overflow_to_the_largest_finite() {
    let sat = |x: f64, to| cast_f64(&[x], to, CastMode::Saturate).unwrap()[0];
    assert_eq!(sat(1000.0, DType::Float8E4M3Fn), 0x7E); // 448
    assert_eq!(sat(f64::INFINITY, DType::Float8E4M3Fn), 0x7E);
    assert_eq!(sat(-1e6, DType::Float8E4M3Fn), 0xFE);
    assert_eq!(sat(1e6, DType::Float8E5M2), 0x7B); // 57344
    assert_eq!(sat(f64::INFINITY, DType::Float8E5M2), 0x7C); // e5m2 keeps its infinity
    assert_eq!(sat(1000.0, DType::Float8E4M3Fnuz), 0x7F); // 240
    assert_eq!(sat(f64::NAN, DType::Float8E4M3Fnuz), 0x80);
    // torch: e5m2 overflows to inf, the fnuz formats to NaN.
    assert_eq!(
        cast_f64(&[1e6], DType::Float8E5M2, CastMode::Torch).unwrap()[0],
        0x7C
    );
    assert_eq!(
        cast_f64(&[1000.0], DType::Float8E4M3Fnuz, CastMode::Torch).unwrap()[0],
        0x80
    );
}

#[test]
fn checked_rejects_what_the_destination_cannot_hold() {
    use ValueErrorKind::*;
    let err = cast_to_vec(
        &f32s(&[1.0, 2.5, -3.0, 300.0]),
        DType::Float32,
        DType::UInt8,
        CastMode::Checked,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "element 2 (-3.0) is out of range for uint8"
    );
    assert_eq!(
        value_error(cast_f64(&[1.0, f64::NAN], DType::Int32, CastMode::Checked)),
        (1, NotFinite)
    );
    assert_eq!(
        value_error(cast_f64(&[70000.0], DType::Float16, CastMode::Checked)),
        (0, Overflow)
    );
    assert!(cast_f64(
        &[65519.0, 1e-9, f64::NAN, f64::INFINITY],
        DType::Float16,
        CastMode::Checked
    )
    .is_ok());
    assert!(cast_f64(&[464.0, -464.0], DType::Float8E4M3Fn, CastMode::Checked).is_ok()); // rounds to 448
    assert_eq!(
        value_error(cast_f64(&[465.0], DType::Float8E4M3Fn, CastMode::Checked)),
        (0, Overflow)
    );
    assert_eq!(
        value_error(cast_f64(
            &[0.0, f64::INFINITY],
            DType::Float8E4M3Fn,
            CastMode::Checked
        )),
        (1, NotFinite)
    );
    assert_eq!(
        value_error(cast_f64(
            &[2.0, -1.0],
            DType::Float8E8M0Fnu,
            CastMode::Checked
        )),
        (1, OutOfRange)
    );
    assert_eq!(
        value_error(cast_f64(
            &[2.0, 0.0],
            DType::Float8E8M0Fnu,
            CastMode::Checked
        )),
        (1, OutOfRange)
    );
    assert_eq!(
        value_error(cast_f64(&[2147483648.0], DType::Int32, CastMode::Checked)),
        (0, OutOfRange)
    );
    assert!(cast_f64(
        &[2147483647.9, -2147483648.9],
        DType::Int32,
        CastMode::Checked
    )
    .is_ok()); // truncation is rounding
    let c = f32s(&[1.0, 0.0, 1.0, 2.0]); // (1+0j), (1+2j)
    assert_eq!(
        value_error(cast_to_vec(
            &c,
            DType::Complex64,
            DType::Float32,
            CastMode::Checked
        )),
        (1, ImaginaryPart)
    );
    assert!(cast_to_vec(&c, DType::Complex64, DType::Complex32, CastMode::Checked).is_ok());
    let ints: Vec<u8> = [5i64, -200].iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(
        value_error(cast_to_vec(
            &ints,
            DType::Int64,
            DType::Int8,
            CastMode::Checked
        )),
        (1, OutOfRange)
    );
}

#[test]
fn exact_rejects_any_change_of_value() {
    assert!(matches!(
        value_error(cast_f64(&[0.5, 0.1], DType::Float32, CastMode::Exact)),
        (1, ValueErrorKind::Inexact { .. })
    ));
    assert!(cast_f64(
        &[0.5, -0.0, f64::NAN, f64::INFINITY, 65504.0],
        DType::Float16,
        CastMode::Exact
    )
    .is_ok());
    assert!(matches!(
        value_error(cast_f64(&[1.5], DType::Int32, CastMode::Exact)),
        (0, ValueErrorKind::Inexact { .. })
    ));
    assert!(cast_f64(&[-7.0, 2e9], DType::Int32, CastMode::Exact).is_ok());
    let big: Vec<u8> = ((1i32 << 24) + 1).to_le_bytes().to_vec();
    let err = cast_to_vec(&big, DType::Int32, DType::Float32, CastMode::Exact).unwrap_err();
    assert_eq!(err.to_string(), "element 0 (16777217) changes value in a cast from int32 to float32 (it would become 16777216.0)");
}

#[test]
fn a_failed_checked_cast_leaves_the_destination_untouched() {
    // Large enough to be split across threads; the bad element is in the last chunk.
    let n = 300_000;
    let mut values = vec![1.0f32; n];
    values[n - 3] = f32::NAN;
    let src = f32s(&values);
    let mut dst = vec![0xAAu8; n * 4];
    let err = cast(
        &src,
        DType::Float32,
        &mut dst,
        DType::Int32,
        CastMode::Checked,
    )
    .unwrap_err();
    assert!(
        matches!(err, CastError::Value { index, .. } if index == n - 3),
        "{err}"
    );
    assert!(dst.iter().all(|&b| b == 0xAA));
    // And the first bad element is the one reported, across chunk boundaries.
    values[100] = f32::INFINITY;
    let err = cast(
        &f32s(&values),
        DType::Float32,
        &mut dst,
        DType::Int32,
        CastMode::Checked,
    )
    .unwrap_err();
    assert!(matches!(err, CastError::Value { index: 100, .. }), "{err}");
}

#[test]
fn bad_buffers_are_errors_not_panics() {
    let mut dst = [0u8; 8];
    assert_eq!(
        cast(
            &[0u8; 7],
            DType::Float32,
            &mut dst,
            DType::Float64,
            CastMode::Torch
        ),
        Err(CastError::PartialElement {
            dtype: DType::Float32,
            len: 7
        })
    );
    assert_eq!(
        cast(
            &[0u8; 8],
            DType::Float32,
            &mut dst,
            DType::Float64,
            CastMode::Torch
        ),
        Err(CastError::LengthMismatch {
            from: DType::Float32,
            to: DType::Float64,
            src_elements: 2,
            dst_elements: 1
        })
    );
    // No alignment is required: an odd offset works.
    let buf = [0u8, 0, 0, 0x80, 0x3F];
    assert_eq!(
        cast_to_vec(&buf[1..], DType::Float32, DType::Float64, CastMode::Torch).unwrap(),
        1.0f64.to_le_bytes()
    );
}

/// NaN patterns of a floating part type: every one for float16 and bfloat16 (both signs, quiet and
/// signalling, every payload), a spread of them for float32 and float64.
fn nan_patterns(part: DType) -> Vec<Vec<u8>> {
    match part {
        DType::Float16 => (0x7C01u16..=0x7FFF)
            .chain(0xFC01..=0xFFFF)
            .map(|b| b.to_le_bytes().to_vec())
            .collect(),
        DType::BFloat16 => (0x7F81u16..=0x7FFF)
            .chain(0xFF81..=0xFFFF)
            .map(|b| b.to_le_bytes().to_vec())
            .collect(),
        DType::Float32 => [
            0x7F80_0001u32,
            0x7FA0_0000,
            0x7FBF_FFFF,
            0x7FC0_0000,
            0x7FC0_1234,
            0x7FFF_FFFF,
        ]
        .iter()
        .flat_map(|&b| [b, b | 0x8000_0000])
        .map(|b| b.to_le_bytes().to_vec())
        .collect(),
        DType::Float64 => [
            0x7FF0_0000_0000_0001u64,
            0x7FF4_0000_0000_0000,
            0x7FF8_0000_0000_0000,
            0x7FF8_0000_DEAD_BEEF,
            0x7FFF_FFFF_FFFF_FFFF,
        ]
        .iter()
        .flat_map(|&b| [b, b | 0x8000_0000_0000_0000])
        .map(|b| b.to_le_bytes().to_vec())
        .collect(),
        other => panic!("{other} is not a complex part type"),
    }
}

#[test]
fn nan_payloads_through_every_pair_with_a_complex_type() {
    // torch's c10::convert (c10/util/TypeCast.h) takes `.real()` of a complex source and casts it
    // to the destination: to the part's own type that is a no-op, every NaN bit kept. Into a
    // complex type it builds the complex from the value (imaginary +0), again keeping the bits —
    // except float16 -> complex32, which a specialisation routes through complex64. So for these
    // seven pairs the real part's bits must come through unchanged (dtcast once changed them for
    // complex32 -> float16, bcomplex32 -> bfloat16 and bfloat16 -> bcomplex32); for every other
    // pair with a complex side, a NaN must stay a NaN in a floating destination.
    use DType::*;
    let keeps_bits = [
        (Complex32, Float16),
        (Complex64, Float32),
        (Complex128, Float64),
        (BComplex32, BFloat16),
        (BFloat16, BComplex32),
        (Float32, Complex64),
        (Float64, Complex128),
    ];
    let mut failures = Vec::new();
    for from in DType::ALL {
        for to in DType::ALL {
            if !(from.is_complex() || to.is_complex()) || from == to {
                continue;
            }
            // torch's pairs (the others follow ml_dtypes, tested in lowp_casts.rs).
            if to.torch_support() != dtcast::dtype::TorchSupport::Casts {
                continue;
            }
            // Sources: the complex types, and the part types of complex types.
            let part = from.to_real();
            if !matches!(part, Float16 | BFloat16 | Float32 | Float64) {
                continue;
            }
            let expected_bits = keeps_bits.contains(&(from, to));
            assert_eq!(
                dtcast::cast::Quirks::of(from, to).part_bits,
                expected_bits,
                "{from} -> {to}"
            );
            for nan in nan_patterns(part) {
                // A complex source gets the NaN as its real part, with +0 and with the NaN itself
                // as imaginary part.
                let sources: Vec<Vec<u8>> = if from.is_complex() {
                    let zero = vec![0u8; nan.len()];
                    vec![
                        [nan.clone(), zero].concat(),
                        [nan.clone(), nan.clone()].concat(),
                    ]
                } else {
                    vec![nan.clone()]
                };
                for src in sources {
                    let out = cast_to_vec(&src, from, to, CastMode::Torch).unwrap();
                    let re = &out[..to.to_real().byte_size().unwrap()];
                    if expected_bits {
                        let mut want = nan.clone();
                        want.resize(to.byte_size().unwrap(), 0);
                        if out != want {
                            failures.push(format!(
                                "{from} -> {to}: {} gave {}",
                                to_hex(&src),
                                to_hex(&out)
                            ));
                        }
                    } else if to.to_real().is_floating_point() {
                        let as_f64 =
                            cast_to_vec(re, to.to_real(), Float64, CastMode::Torch).unwrap();
                        let x = f64::from_le_bytes(as_f64.try_into().unwrap());
                        if !x.is_nan() {
                            failures.push(format!("{from} -> {to}: NaN {} gave {x}", to_hex(&src)));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn fresh_output_buffers_are_zeroed_at_every_size_and_allocating_casts_equal_casts_into_a_buffer() {
    // `zeroed_vec` takes its zeros from the allocator and asks for huge pages from 4 MiB up:
    // whatever the size (none, one element, the edges of that threshold and of a 2 MiB page),
    // every element reads as zero and takes a write.
    use dtcast::cast::{prefer_huge_pages, zeroed_vec};
    for n in [0usize, 1, 4095, (4 << 20) - 1, 4 << 20, (9 << 20) + 17] {
        let mut v: Vec<u8> = zeroed_vec(n).expect("memory");
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&b| b == 0), "{n} bytes");
        v.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
        let words: Vec<u128> = zeroed_vec(n / 16).expect("memory");
        assert!(words.len() == n / 16 && words.iter().all(|&w| w == 0));
    }
    assert_eq!(zeroed_vec::<()>(5).expect("no memory needed").len(), 5);
    assert!(
        zeroed_vec::<u64>(usize::MAX / 4).is_none(),
        "too large: an error, not an abort"
    );
    // Advice on any slice (unaligned, small, large) changes no value.
    let mut odd = vec![7u8; (6 << 20) + 3];
    prefer_huge_pages(&mut odd[3..]);
    prefer_huge_pages(&mut odd[..10]);
    assert!(odd.iter().all(|&b| b == 7));
    // An allocating cast with a large fresh output (12 MiB of float32 to 6 MiB of bfloat16, and
    // back to 12 MiB) gives the bytes of the same cast into a caller's buffer.
    let n = 3 << 20;
    let src: Vec<u8> = (0..n as u32)
        .flat_map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761) >> 2).to_le_bytes())
        .collect();
    let allocating_equals_into = |src: &[u8], from: DType, to: DType, bytes: usize| {
        let fresh = cast_to_vec(src, from, to, CastMode::Torch).unwrap();
        let mut into = vec![0xAAu8; bytes];
        cast(src, from, &mut into, to, CastMode::Torch).unwrap();
        assert!(fresh == into, "{from} -> {to}");
        fresh
    };
    let half = allocating_equals_into(&src, DType::Float32, DType::BFloat16, 2 * n);
    allocating_equals_into(&half, DType::BFloat16, DType::Float32, 4 * n);
}
