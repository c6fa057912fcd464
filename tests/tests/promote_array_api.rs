//! The Array API policy: every row of array-api-strict 2.6.1's answers (`arrayapi/`, API
//! version 2025.12), its errors as errors, and the laws the standard's lattice keeps.

use dtcast::cli::parse_operand;
use dtcast::promote::{ArrayApi, ArrayApiRule, PromoteError};
use dtcast::{DType, Operand, Policy, ScalarKind};
use dtcast_tests::{assert_conforms, dtype, promote_type_rows, result_type_rows, rows};
use proptest::prelude::*;

const XP: ArrayApi = ArrayApi;

#[test]
fn promote_types_matches_array_api_strict() {
    let rows = rows("arrayapi/array_api_promote_types.json");
    assert_eq!(rows.len(), 13 * 13);
    assert_conforms(
        "arrayapi/array_api_promote_types.json",
        "array-api-strict",
        promote_type_rows(&XP, &rows, "array-api-strict"),
    );
}

#[test]
fn result_type_matches_array_api_strict_with_scalars_and_their_errors() {
    // Every Python int is an int whose value array-api-strict checks.
    let rows = rows("arrayapi/array_api_result_type.json");
    assert_eq!(rows.len(), 1392);
    assert_conforms(
        "arrayapi/array_api_result_type.json",
        "array-api-strict",
        result_type_rows(&XP, &rows, "array-api-strict", &|o| {
            parse_operand(o).expect("an operand")
        }),
    );
}

#[test]
fn can_cast_matches_array_api_strict() {
    let rows = rows("arrayapi/array_api_can_cast.json");
    assert_eq!(rows.len(), 13 * 13);
    let failures: Vec<String> = rows
        .iter()
        .filter(|r| XP.can_cast(dtype(&r[0]), dtype(&r[1])) != r[2].as_bool().unwrap())
        .map(|r| format!("can_cast({}, {}): array-api-strict {}", r[0], r[1], r[2]))
        .collect();
    assert_conforms(
        "arrayapi/array_api_can_cast.json",
        "array-api-strict",
        (rows.len(), failures),
    );
}

#[test]
fn errors_name_the_rule() {
    let e = XP.promote_types(DType::Int32, DType::Float32).unwrap_err();
    assert_eq!(
        e,
        PromoteError::ArrayApi {
            a: DType::Int32,
            b: DType::Float32,
            rule: ArrayApiRule::KindsDiffer
        }
    );
    assert!(e.to_string().contains("only within a kind"), "{e}");
    let e = XP.promote_types(DType::UInt64, DType::Int8).unwrap_err();
    assert!(e.to_string().contains("no signed integer"), "{e}");
    let ops = [
        Operand::Tensor(DType::Int8),
        Operand::WrappedScalar(ScalarKind::Float),
    ];
    let e = XP.result_type(&ops).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("Python float scalars can only be promoted with floating-point arrays"),
        "{e}"
    );
    let ops = [Operand::Tensor(DType::UInt8), Operand::IntLiteral(-1)];
    assert!(matches!(
        XP.result_type(&ops),
        Err(PromoteError::PythonIntOutOfBounds {
            value: -1,
            dtype: DType::UInt8
        })
    ));
    // An int whose value is not known (a wrapped scalar) is refused with bool arrays too.
    let ops = [
        Operand::Tensor(DType::Bool),
        Operand::WrappedScalar(ScalarKind::Int),
    ];
    assert_eq!(
        XP.result_type(&ops),
        Err(PromoteError::ArrayApiScalar {
            scalar: ScalarKind::Int,
            dtype: DType::Bool
        })
    );
    // Scalars alone have no dtype; a dtype the standard lacks is named.
    let e = XP
        .result_type(&[Operand::WrappedScalar(ScalarKind::Int)])
        .unwrap_err();
    assert_eq!(e, PromoteError::ArrayApiNoArray);
    assert_eq!(XP.result_type(&[]), Err(PromoteError::NoOperands));
    let e = XP
        .promote_types(DType::Float16, DType::Float32)
        .unwrap_err();
    assert!(
        matches!(
            e,
            PromoteError::NotInPolicy {
                dtype: DType::Float16,
                ..
            }
        ),
        "{e}"
    );
}

fn standard() -> impl Strategy<Value = DType> {
    proptest::sample::select(ArrayApi::DTYPES.to_vec())
}

/// The standard's kinds: bool, the integers, the floating types (real and complex).
fn kind(d: DType) -> u8 {
    if d == DType::Bool {
        0
    } else if d.is_integral(false) {
        1
    } else {
        2
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn promotion_is_commutative_and_never_changes_kind(a in standard(), b in standard()) {
        let (ab, ba) = (XP.promote_types(a, b), XP.promote_types(b, a));
        prop_assert_eq!(ab.is_ok(), ba.is_ok());
        if let (Ok(x), Ok(y)) = (ab, ba) {
            prop_assert_eq!(x, y);
            prop_assert_eq!(kind(x), kind(a));
            prop_assert_eq!(kind(x), kind(b));
            // The result holds both: a join in the lattice.
            prop_assert!(XP.can_cast(a, x) && XP.can_cast(b, x));
        } else {
            // No result only across kinds, or uint64 with a signed integer.
            let unsigned64_signed = (a == DType::UInt64 && b.is_signed() && b.is_integral(false))
                || (b == DType::UInt64 && a.is_signed() && a.is_integral(false));
            prop_assert!(kind(a) != kind(b) || unsigned64_signed, "{a} {b}");
        }
    }

    #[test]
    fn an_int_scalar_never_changes_the_arrays_dtype(a in standard(), v in -200i128..200) {
        let arrays = XP.result_type(&[Operand::Tensor(a)]).unwrap();
        prop_assert_eq!(arrays, a);
        match XP.result_type(&[Operand::Tensor(a), Operand::IntLiteral(v)]) {
            Ok(t) => prop_assert_eq!(t, a),
            Err(_) => prop_assert!(a == DType::Bool || !a.integer_range().is_some_and(|(lo, hi)| lo <= v && v <= hi)),
        }
    }
}
