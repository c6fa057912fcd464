//! Bitcast: conformance with torch's view(dtype) and jax's bitcast_convert_type, and round trips.

use dtcast::bitcast::{bitcast, reinterpret, BitcastError};
use dtcast::dtype::half::{bf16, f16};
use dtcast::dtype::num_complex::Complex;
use dtcast::{DType, Element, Rule, View, Xla};
use dtcast_tests::{dtype, expected_shape, rows, shape, Expected};
use proptest::prelude::*;

/// Runs every row of a bitcast fixture through `rule`. With `messages`, an error must carry the
/// reference's message (after the rule's name); otherwise only error-vs-shape is compared.
fn conforms(fixture: &str, rule: &dyn Rule, messages: bool) {
    let rows = rows(fixture);
    assert!(rows.len() > 3000, "{fixture} has too few rows");
    let mut failures = Vec::new();
    for r in &rows {
        let (from, to, input) = (dtype(&r[0]), dtype(&r[1]), shape(&r[2]));
        let got = rule.infer(&input, from, to);
        let ok = match (&got, expected_shape(&r[3])) {
            (Ok(g), Expected::Ok(w)) => *g == w,
            (Err(e), Expected::Err(m)) => {
                !messages || e.to_string() == format!("{} rule: {m}", rule.name())
            }
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{}: {from}{input:?} -> {to}: got {got:?}, reference says {}",
                rule.name(),
                r[3]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows differ:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

#[test]
fn view_matches_torch_including_messages() {
    conforms("torch_view_dtype.json", &View, true);
}

#[test]
fn xla_matches_jax_bitcast_convert_type() {
    // jax's messages are its own, so only error-vs-shape compares. The fixture has no bool rows
    // (jax rejects bool unless both sides are bool); bool is covered below.
    conforms("jax_bitcast_convert.json", &Xla, false);
}

/// The low-precision rows (`fixtures/lowp/bitcast.json`): jax's true bit widths under `xla`
/// (int8 -> int4 appends a dimension of 2; float6 only to 6-bit types), torch's `view` with its
/// sub-byte and float4_e2m1fn_x2 dtypes counted as one byte. Rows naming dtypes dtcast lacks
/// (bits16, int3...) are skipped; error-vs-shape is compared.
#[test]
fn low_precision_rows_match_jax_and_torch() {
    let data = dtcast_tests::fixture("lowp/bitcast.json");
    for (key, rule) in [("rows", &Xla as &dyn Rule), ("torch_view_rows", &View)] {
        let rows = data[key].as_array().expect("rows");
        let (mut total, mut failures) = (0, Vec::new());
        for r in rows {
            let name = |i: usize| r[i].as_str().expect("name");
            let (Ok(from), Ok(to)) = (name(0).parse::<DType>(), name(1).parse::<DType>()) else {
                continue;
            };
            // dtcast's xla rule counts bool as a byte on purpose (see below); jax refuses it.
            if key == "rows" && (from == DType::Bool) != (to == DType::Bool) {
                continue;
            }
            total += 1;
            let input = shape(&r[2]);
            let got = rule.infer(&input, from, to);
            let ok = match (&got, expected_shape(&r[3])) {
                (Ok(g), Expected::Ok(w)) => *g == w,
                (Err(_), Expected::Err(_)) => true,
                _ => false,
            };
            if !ok {
                failures.push(format!(
                    "{from}{input:?} -> {to}: got {got:?}, reference {}",
                    r[3]
                ));
            }
        }
        assert!(total > 3000, "{key}: {total} rows");
        assert!(
            failures.is_empty(),
            "{key}: {} of {total} differ:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

#[test]
fn xla_counts_bool_as_a_byte() {
    // CINN's int64 <-> bool (shared reference §1.5): bool is 8 bits here, not XLA's 1-bit PRED.
    assert_eq!(Xla.infer(&[3], DType::Int64, DType::Bool), Ok(vec![3, 8]));
    assert_eq!(Xla.infer(&[3, 8], DType::Bool, DType::Int64), Ok(vec![3]));
    assert!(matches!(
        Xla.infer(&[3, 4], DType::Bool, DType::Int64),
        Err(BitcastError::LastDimNotRatio { ratio: 8, .. })
    ));
}

#[test]
fn errors_name_the_rule_and_the_numbers() {
    let e = Xla
        .infer(&[2, 3], DType::Float32, DType::Float64)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("xla rule:") && e.contains("needs the last dimension to be 2, but got 3"),
        "{e}"
    );
    let e = Xla
        .infer(&[2], DType::Complex64, DType::Float64)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("complex type can only be bitcast to itself"),
        "{e}"
    );
    let e = View
        .infer(&[2, 3], DType::UInt8, DType::Int32)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "view rule: self.size(-1) must be divisible by 4 to view Byte as Int (different element sizes), but got 3");
}

#[test]
fn buffers_are_checked_against_their_shape() {
    let bytes = [0u8; 12];
    assert!(bitcast(&View, &bytes, &[3], DType::Float32, DType::UInt8).is_ok());
    assert_eq!(
        bitcast(&View, &bytes, &[4], DType::Float32, DType::UInt8),
        Err(BitcastError::ByteLength {
            expected: 16,
            actual: 12
        })
    );
    assert!(matches!(
        bitcast(
            &View,
            &bytes,
            &[usize::MAX, 4],
            DType::Float32,
            DType::UInt8
        ),
        Err(BitcastError::Overflow { .. })
    ));
    assert_eq!(
        reinterpret::<f32>(&bytes[..7]),
        Err(BitcastError::PartialElement {
            dtype: DType::Float32,
            len: 7
        })
    );
    assert_eq!(
        reinterpret::<bool>(&[1, 0, 7]),
        Err(BitcastError::InvalidBool { index: 2, byte: 7 })
    );
}

fn any_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

fn round_trip_typed<T: Element>(bytes: &[u8]) -> Result<(), TestCaseError> {
    let typed = reinterpret::<T>(bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(bytemuck::cast_slice::<T, u8>(&typed), bytes);
    // At an odd offset the buffer is misaligned for every multi-byte type: the copy path.
    let mut shifted = vec![0u8; bytes.len() + 1];
    shifted[1..].copy_from_slice(bytes);
    let typed = reinterpret::<T>(&shifted[1..]).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(bytemuck::cast_slice::<T, u8>(&typed), bytes);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn bitcast_there_and_back_restores_shape_and_bytes(
        a in any_dtype(),
        b in any_dtype(),
        outer in proptest::collection::vec(0usize..4, 0..3),
        last in 1usize..5,
        xla in any::<bool>(),
    ) {
        let rule: &dyn Rule = if xla { &Xla } else { &View };
        // A shape every widening accepts: for `view` a last dimension that is a multiple of 16 (the
        // widest itemsize); for `xla` one equal to the width ratio.
        let mut input = outer.clone();
        input.push(if !xla { last * 16 } else if a.bits() < b.bits() { b.bits() / a.bits() } else { last });
        let numel = dtcast::bitcast::numel(&input).unwrap_or(0);
        // A packed buffer must end on a byte.
        prop_assume!(a.storage_bytes(numel).is_ok());
        let len = a.storage_bytes(numel).unwrap_or(0);
        let bytes: Vec<u8> = (0..len).map(|i| if a == DType::Bool { (i % 2) as u8 } else { i as u8 }).collect();
        let divides = a.bits() % b.bits() == 0 || b.bits() % a.bits() == 0;
        if let Ok(there) = bitcast(rule, &bytes, &input, a, b) {
            // Widths that do not divide go one way only (an empty buffer fits any shape).
            prop_assume!(divides);
            let back = bitcast(rule, there.bytes, &there.shape, b, a);
            prop_assert!(back.is_ok(), "{:?}: {}{:?} -> {}{:?} does not come back: {:?}", rule, a, input, b, there.shape, back);
            let back = back.unwrap();
            prop_assert_eq!(&back.shape, &input);
            prop_assert_eq!(back.bytes, &bytes[..]);
        } else {
            // Refused for a shape like this: complex <-> other types and widths that do not divide
            // (float6 <-> 8 bits) under xla; under view, packed buffers (torch counts int4 as a
            // byte) and the packed floats torch lacks.
            let xla_refuses = ((a.is_complex() || b.is_complex()) && a != b) || !divides;
            let view_refuses = (a.is_packed() || b.is_packed()) && a != b;
            prop_assert!(if xla { xla_refuses } else { view_refuses }, "{:?} refused {} -> {}", rule, a, b);
        }
    }

    #[test]
    fn reinterpret_round_trips_every_element_type(dt in any_dtype(), numel in 0usize..9, seed in any::<u64>()) {
        prop_assume!(!dt.is_packed()); // no element type: packed bytes
        let bytes: Vec<u8> = (0..numel * dt.byte_size().unwrap())
            .map(|i| (seed.rotate_left(i as u32 % 64) as u8) & if dt == DType::Bool { 1 } else { 0xFF })
            .collect();
        match dt {
            DType::Bool => round_trip_typed::<bool>(&bytes)?,
            DType::UInt8 => round_trip_typed::<u8>(&bytes)?,
            DType::Int8 => round_trip_typed::<i8>(&bytes)?,
            DType::Int16 => round_trip_typed::<i16>(&bytes)?,
            DType::Int32 => round_trip_typed::<i32>(&bytes)?,
            DType::Int64 => round_trip_typed::<i64>(&bytes)?,
            DType::UInt16 => round_trip_typed::<u16>(&bytes)?,
            DType::UInt32 => round_trip_typed::<u32>(&bytes)?,
            DType::UInt64 => round_trip_typed::<u64>(&bytes)?,
            DType::Float16 => round_trip_typed::<f16>(&bytes)?,
            DType::BFloat16 => round_trip_typed::<bf16>(&bytes)?,
            DType::Float32 => round_trip_typed::<f32>(&bytes)?,
            DType::Float64 => round_trip_typed::<f64>(&bytes)?,
            DType::Complex32 => round_trip_typed::<Complex<f16>>(&bytes)?,
            DType::Complex64 => round_trip_typed::<Complex<f32>>(&bytes)?,
            DType::Complex128 => round_trip_typed::<Complex<f64>>(&bytes)?,
            DType::BComplex32 => round_trip_typed::<Complex<bf16>>(&bytes)?,
            DType::Float8E4M3Fn => round_trip_typed::<dtcast::dtype::Float8E4M3Fn>(&bytes)?,
            DType::Float8E5M2 => round_trip_typed::<dtcast::dtype::Float8E5M2>(&bytes)?,
            DType::Float8E4M3Fnuz => round_trip_typed::<dtcast::dtype::Float8E4M3Fnuz>(&bytes)?,
            DType::Float8E5M2Fnuz => round_trip_typed::<dtcast::dtype::Float8E5M2Fnuz>(&bytes)?,
            DType::Float8E8M0Fnu => round_trip_typed::<dtcast::dtype::Float8E8M0Fnu>(&bytes)?,
            DType::Float8E4M3 => round_trip_typed::<dtcast::dtype::Float8E4M3>(&bytes)?,
            DType::Float8E3M4 => round_trip_typed::<dtcast::dtype::Float8E3M4>(&bytes)?,
            DType::Float8E4M3B11Fnuz => round_trip_typed::<dtcast::dtype::Float8E4M3B11Fnuz>(&bytes)?,
            DType::Float8E5M3Fnu => round_trip_typed::<dtcast::dtype::Float8E5M3Fnu>(&bytes)?,
            DType::Float4E2M1FnX2 => round_trip_typed::<dtcast::dtype::Float4E2M1FnX2>(&bytes)?,
            other => prop_assert!(false, "no element type for {}", other),
        }
    }
}
