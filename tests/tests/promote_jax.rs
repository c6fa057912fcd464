//! The JAX policy: every row of real jax 0.10.2's answers (`policies/jax_*.json` and
//! `jax_lattice.json`, x64 on and off), and the laws of a join in a partial order.

use dtcast::cli::parse_operand;
use dtcast::promote::{Jax, PromoteError};
use dtcast::{DType, Operand, Policy, ScalarKind};
use dtcast_tests::{fixture, rows};
use proptest::prelude::*;
use serde_json::Value;

/// A fixture's expected result: a dtype, or an error.
fn expected(v: &Value) -> Result<DType, String> {
    let s = v.as_str().expect("a result");
    match s.strip_prefix("error: ") {
        Some(msg) => Err(msg.to_owned()),
        None => Ok(s.parse().expect("a dtype dtcast has")),
    }
}

/// Compares `got` with `want` (a dtype exactly, an error as an error), collecting failures.
fn check(
    failures: &mut Vec<String>,
    what: String,
    got: Result<DType, PromoteError>,
    want: Result<DType, String>,
) {
    match (&got, &want) {
        (Ok(g), Ok(w)) if g == w => {}
        (Err(_), Err(_)) => {}
        _ => failures.push(format!("{what}: jax {want:?}, dtcast {got:?}")),
    }
}

fn promote_rows(jax: Jax, rows: &[Value]) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for r in rows {
        let (a, b): (DType, DType) = (
            r[0].as_str().unwrap().parse().unwrap(),
            r[1].as_str().unwrap().parse().unwrap(),
        );
        check(
            &mut failures,
            format!("promote_types({a}, {b})"),
            jax.promote_types(a, b),
            expected(&r[2]),
        );
    }
    (rows.len(), failures)
}

fn result_rows(jax: Jax, rows: &[Value]) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    for r in rows {
        let ops: Vec<Operand> = r[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| parse_operand(o.as_str().unwrap()).expect("an operand"))
            .collect();
        check(
            &mut failures,
            format!("result_type({:?})", r[0]),
            jax.result_type(&ops),
            expected(&r[1]),
        );
    }
    (rows.len(), failures)
}

fn assert_all(name: &str, (total, failures): (usize, Vec<String>)) {
    assert!(total > 0, "{name}: no rows");
    assert!(
        failures.is_empty(),
        "{name}: {} of {total} rows differ from jax:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn promote_types_matches_jax() {
    assert_all(
        "policies/jax_promote_types.json",
        promote_rows(Jax::default(), &rows("policies/jax_promote_types.json")),
    );
    let lattice = fixture("jax_lattice.json");
    for (key, jax) in [("x64", Jax::default()), ("no_x64", Jax::without_x64())] {
        let rows = lattice[key]["promote_types"].as_array().unwrap();
        assert_eq!(rows.len(), 32 * 32);
        assert_all(
            &format!("jax_lattice.json {key} promote_types"),
            promote_rows(jax, rows),
        );
    }
}

#[test]
fn result_type_matches_jax_with_weak_scalars() {
    assert_all(
        "policies/jax_result_type.json",
        result_rows(Jax::default(), &rows("policies/jax_result_type.json")),
    );
    let lattice = fixture("jax_lattice.json");
    for (key, jax) in [("x64", Jax::default()), ("no_x64", Jax::without_x64())] {
        let rows = lattice[key]["result_type"].as_array().unwrap();
        assert_all(
            &format!("jax_lattice.json {key} result_type"),
            result_rows(jax, rows),
        );
    }
}

#[test]
fn dtypes_jax_lacks_are_errors_naming_them() {
    let jax = Jax::default();
    for dt in [DType::Complex32, DType::BComplex32, DType::Float4E2M1FnX2] {
        assert!(!Jax::has(dt));
        let e = jax.promote_types(dt, DType::Float32).unwrap_err();
        assert_eq!(
            e,
            PromoteError::NotInPolicy {
                dtype: dt,
                policy: "JAX"
            }
        );
        assert!(e.to_string().contains(dt.name()), "{e}");
        assert!(jax.result_type(&[Operand::Tensor(dt)]).is_err());
    }
    let e = jax
        .promote_types(DType::Float8E4M3Fn, DType::BFloat16)
        .unwrap_err();
    assert!(e.to_string().starts_with("Input dtypes ('float8_e4m3fn', 'bfloat16') have no available implicit dtype promotion path"), "{e}");
    assert_eq!(
        (jax.default_dtype(), jax.default_complex_dtype()),
        (DType::Float64, DType::Complex128)
    );
    let no_x64 = Jax::without_x64();
    assert_eq!(
        (no_x64.default_dtype(), no_x64.default_complex_dtype()),
        (DType::Float32, DType::Complex64)
    );
}

fn jax_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(
        DType::ALL
            .iter()
            .copied()
            .filter(|&d| Jax::has(d))
            .collect::<Vec<_>>(),
    )
}

fn jax_policy() -> impl Strategy<Value = Jax> {
    prop_oneof![Just(Jax::default()), Just(Jax::without_x64())]
}

proptest! {
    #[test]
    fn promote_types_is_commutative_and_idempotent(jax in jax_policy(), a in jax_dtype(), b in jax_dtype()) {
        // (An error names the operands in order: compare the answers, not the texts.)
        prop_assert_eq!(jax.promote_types(a, b).ok(), jax.promote_types(b, a).ok());
        prop_assert_eq!(jax.promote_types(a, a), Ok(a));
        if let Ok(j) = jax.promote_types(a, b) {
            // The join lies above both.
            prop_assert_eq!(jax.promote_types(j, a), Ok(j));
            prop_assert_eq!(jax.promote_types(j, b), Ok(j));
        }
    }

    #[test]
    fn bool_is_the_bottom(jax in jax_policy(), a in jax_dtype()) {
        prop_assert_eq!(jax.promote_types(DType::Bool, a), Ok(a));
    }

    #[test]
    fn joins_are_associative_where_they_exist(jax in jax_policy(), a in jax_dtype(), b in jax_dtype(), c in jax_dtype()) {
        let left = jax.promote_types(a, b).and_then(|ab| jax.promote_types(ab, c));
        let right = jax.promote_types(b, c).and_then(|bc| jax.promote_types(a, bc));
        if let (Ok(l), Ok(r)) = (&left, &right) {
            prop_assert_eq!(l, r);
        }
        // With x64 (nothing canonicalized), result_type over arrays is the join of all at once.
        let ops = [Operand::Tensor(a), Operand::Tensor(b), Operand::Tensor(c)];
        if let (Ok(l), Ok(all), true) = (&left, jax.result_type(&ops), jax.x64()) {
            prop_assert_eq!(*l, all);
        }
    }

    #[test]
    fn a_weak_scalar_never_widens_an_array_of_its_kind(jax in jax_policy(), a in jax_dtype()) {
        // int + Python int keeps the int; float + Python float or int keeps the float.
        let kinds: &[ScalarKind] = if a.is_floating_point() {
            &[ScalarKind::Int, ScalarKind::Float]
        } else if a.is_integral(false) {
            &[ScalarKind::Int]
        } else {
            &[]
        };
        for &k in kinds {
            let got = jax.result_type(&[Operand::Tensor(a), Operand::WrappedScalar(k)]);
            let want = jax.result_type(&[Operand::Tensor(a)]);
            prop_assert_eq!(got, want, "{} with a {:?} scalar", a, k);
        }
    }
}
