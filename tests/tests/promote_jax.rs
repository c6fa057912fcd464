//! The JAX policy: every row of real jax 0.10.2's answers (`policies/jax_*.json` and
//! `jax_lattice.json`, x64 on and off), and the laws of a join in a partial order.

use dtcast::cli::parse_operand;
use dtcast::promote::{Jax, PromoteError};
use dtcast::{DType, Operand, Policy};
use dtcast_tests::{
    assert_conforms, fixture, promote_type_rows, result_type_rows, rows, weaker_scalar_kinds,
};
use proptest::prelude::*;
use serde_json::Value;

fn promote_rows(jax: Jax, rows: &[Value]) -> (usize, Vec<String>) {
    promote_type_rows(&jax, rows, "jax")
}

fn result_rows(jax: Jax, rows: &[Value]) -> (usize, Vec<String>) {
    result_type_rows(&jax, rows, "jax", &|o| {
        parse_operand(o).expect("an operand")
    })
}

#[test]
fn promote_types_matches_jax() {
    assert_conforms(
        "policies/jax_promote_types.json",
        "jax",
        promote_rows(Jax::default(), &rows("policies/jax_promote_types.json")),
    );
    let lattice = fixture("jax_lattice.json");
    for (key, jax) in [("x64", Jax::default()), ("no_x64", Jax::without_x64())] {
        let rows = lattice[key]["promote_types"].as_array().unwrap();
        assert_eq!(rows.len(), 32 * 32);
        assert_conforms(
            &format!("jax_lattice.json {key} promote_types"),
            "jax",
            promote_rows(jax, rows),
        );
    }
}

#[test]
fn result_type_matches_jax_with_weak_scalars() {
    assert_conforms(
        "policies/jax_result_type.json",
        "jax",
        result_rows(Jax::default(), &rows("policies/jax_result_type.json")),
    );
    let lattice = fixture("jax_lattice.json");
    for (key, jax) in [("x64", Jax::default()), ("no_x64", Jax::without_x64())] {
        let rows = lattice[key]["result_type"].as_array().unwrap();
        assert_conforms(
            &format!("jax_lattice.json {key} result_type"),
            "jax",
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

#[test]
fn joins_are_associative_where_they_stay_on_dtypes() {
    // Every triple, both modes.
    let dtypes: Vec<DType> = DType::ALL.into_iter().filter(|&d| Jax::has(d)).collect();
    let mut checked = 0;
    for jax in [Jax::default(), Jax::without_x64()] {
        // `promote_types` names the weak float node float64 (int64 ∨ uint64, as NumPy names a
        // Python float), so a fold through that node leaves the lattice: (float16 ∨ int8) ∨
        // uint64 is float16, float16 ∨ (int8 ∨ uint64) = float16 ∨ float64 is float64. Only
        // folds that stay on dtypes must agree.
        let weak = |x: DType, y: DType| {
            x != DType::Float64
                && y != DType::Float64
                && jax.promote_types(x, y) == Ok(DType::Float64)
        };
        for &a in &dtypes {
            for &b in &dtypes {
                for &c in &dtypes {
                    if weak(a, b) || weak(b, c) {
                        continue;
                    }
                    let left = jax
                        .promote_types(a, b)
                        .and_then(|ab| jax.promote_types(ab, c));
                    let right = jax
                        .promote_types(b, c)
                        .and_then(|bc| jax.promote_types(a, bc));
                    if let (Ok(l), Ok(r)) = (&left, &right) {
                        assert_eq!(l, r, "{a} {b} {c}");
                        checked += 1;
                    }
                    // With x64 (nothing canonicalized), result_type over arrays is the join of
                    // all at once.
                    let ops = [Operand::Tensor(a), Operand::Tensor(b), Operand::Tensor(c)];
                    if let (Ok(l), Ok(all), true) = (&left, jax.result_type(&ops), jax.x64()) {
                        assert_eq!(*l, all, "{a} {b} {c}");
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
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
    fn a_weak_scalar_never_widens_an_array_of_its_kind(jax in jax_policy(), a in jax_dtype()) {
        // int + Python int keeps the int; float + Python float or int keeps the float.
        for &k in weaker_scalar_kinds(a) {
            let got = jax.result_type(&[Operand::Tensor(a), Operand::WrappedScalar(k)]);
            let want = jax.result_type(&[Operand::Tensor(a)]);
            prop_assert_eq!(got, want, "{} with a {:?} scalar", a, k);
        }
    }
}

#[test]
fn the_low_precision_fixtures_jax_rows_match() {
    // fixtures/lowp/promotion.json (jax 0.10.2, x64): jnp.promote_types with ml_dtypes' types
    // (jax has no float8_e5m3fnu).
    let data = fixture("lowp/promotion.json");
    assert_eq!(data["jax"]["x64"], true);
    let rows = data["jax"]["rows"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 1024);
    assert_conforms(
        "lowp/promotion.json jax",
        "jax",
        promote_rows(Jax::default(), &rows),
    );
}
