//! Laws of the cast modes, over random bit patterns of every dtype pair.

use dtcast::cast::{cast_to_vec, CastError, CastMode};
use dtcast::dtype::packing;
use dtcast::DType;
use proptest::prelude::*;

/// Every dtype with value casts (float4_e2m1fn_x2 casts only to itself: lowp_casts.rs).
fn any_dtype() -> impl Strategy<Value = DType> {
    let values: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|d| *d != DType::Float4E2M1FnX2)
        .collect();
    proptest::sample::select(values)
}

/// Random elements of `a` (any bit pattern; bool bytes any value too): fewer than `max`, and a
/// multiple of 8 where either dtype is packed, so that both buffers are whole bytes.
fn buffer(a: DType, b: DType, max: usize) -> impl Strategy<Value = Vec<u8>> {
    let packed = a.is_packed() || b.is_packed();
    (0..max).prop_flat_map(move |n| {
        let n = if packed { n.next_multiple_of(8) } else { n };
        proptest::collection::vec(any::<u8>(), a.storage_bytes(n).unwrap())
    })
}

fn pair_and_buffer(max: usize) -> impl Strategy<Value = (DType, DType, Vec<u8>)> {
    (any_dtype(), any_dtype()).prop_flat_map(move |(a, b)| (Just(a), Just(b), buffer(a, b, max)))
}

/// The elements of a buffer, each as bytes (a packed element as one byte, its code).
fn elements(bytes: &[u8], dt: DType) -> Vec<Vec<u8>> {
    if dt.is_packed() {
        let mut codes = vec![0u8; dt.elements_in(bytes.len()).unwrap()];
        packing::unpack(dt, bytes, &mut codes).unwrap();
        return codes.into_iter().map(|c| vec![c]).collect();
    }
    bytes
        .chunks_exact(dt.byte_size().unwrap())
        .map(<[u8]>::to_vec)
        .collect()
}

/// Casts one element (as `elements` gives it): eight copies where a side is packed, so that the
/// buffers are whole bytes; the first result, as `elements` gives it.
fn cast_one(elem: &[u8], a: DType, b: DType, mode: CastMode) -> Result<Vec<u8>, CastError> {
    let copies = if a.is_packed() || b.is_packed() { 8 } else { 1 };
    let src = if a.is_packed() {
        let mut packed = vec![0u8; a.storage_bytes(8).unwrap()];
        packing::pack(a, &[elem[0]; 8], &mut packed).unwrap();
        packed
    } else {
        elem.repeat(copies)
    };
    let out = cast_to_vec(&src, a, b, mode)?;
    Ok(elements(&out, b).swap_remove(0))
}

/// The element's value as (re, im) f64s (integers beyond 2^53 rounded; fine for NaN and zero tests).
fn value(elem: &[u8], dt: DType) -> (f64, f64) {
    let f = cast_one(elem, dt, DType::Complex128, CastMode::Torch).expect("one element");
    (
        f64::from_le_bytes(f[..8].try_into().unwrap()),
        f64::from_le_bytes(f[8..].try_into().unwrap()),
    )
}

/// `true` if the element is a NaN (in either part for complex types).
fn is_nan(elem: &[u8], dt: DType) -> bool {
    let (re, im) = value(elem, dt);
    re.is_nan() || im.is_nan()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, max_global_rejects: 1_000_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn checked_succeeds_with_torch_values_and_exact_is_stricter((a, b, src) in pair_and_buffer(8)) {
        let torch = cast_to_vec(&src, a, b, CastMode::Torch).unwrap();
        let checked = cast_to_vec(&src, a, b, CastMode::Checked);
        if let Ok(out) = &checked {
            prop_assert_eq!(out, &torch);
        }
        if let Ok(out) = cast_to_vec(&src, a, b, CastMode::Exact) {
            prop_assert_eq!(&out, &torch);
            prop_assert!(checked.is_ok(), "exact accepted what checked refused: {:?}", checked);
        }
    }

    #[test]
    fn the_reported_element_is_the_first_bad_one((a, b, src) in pair_and_buffer(8), exact in any::<bool>()) {
        let mode = if exact { CastMode::Exact } else { CastMode::Checked };
        let first_bad = elements(&src, a).iter().position(|e| cast_one(e, a, b, mode).is_err());
        match cast_to_vec(&src, a, b, mode) {
            Ok(_) => prop_assert_eq!(first_bad, None),
            Err(dtcast::cast::CastError::Value { index, .. }) => prop_assert_eq!(Some(index), first_bad),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }

    #[test]
    fn exact_casts_go_back_exactly((a, b, src) in pair_and_buffer(8)) {
        if let Ok(out) = cast_to_vec(&src, a, b, CastMode::Exact) {
            prop_assert!(cast_to_vec(&out, b, a, CastMode::Exact).is_ok(), "{} -> {} -> {} changed a value", a, b, a);
        }
    }

    #[test]
    fn rounding_is_idempotent((a, b, src) in pair_and_buffer(8)) {
        // x -> b is a projection onto b's values: taking the result back to a (when b's values are
        // all a's values) and casting again gives the same bytes. NaN bits are torch's per path,
        // so NaN elements are left out.
        let ab = cast_to_vec(&src, a, b, CastMode::Torch).unwrap();
        if cast_to_vec(&ab, b, a, CastMode::Exact).is_ok() {
            let back = cast_to_vec(&ab, b, a, CastMode::Torch).unwrap();
            let again = cast_to_vec(&back, a, b, CastMode::Torch).unwrap();
            for (x, y) in elements(&again, b).iter().zip(elements(&ab, b)) {
                // A zero may lose its sign through a type without -0 (the fnuz formats).
                let zero = value(&y, b) == (0.0, 0.0) && value(x, b) == (0.0, 0.0);
                if !is_nan(&y, b) && !zero {
                    prop_assert_eq!(x, &y);
                }
            }
        }
    }

    #[test]
    fn modes_agree_where_nothing_is_lost((a, b, src) in pair_and_buffer(8)) {
        // Where an element fits (Checked accepts it) and torch rounds once (sources that are
        // exactly f32s, or any source into an integer), Torch and Saturate give the same bytes.
        let single_rounding = b.is_integral(true) || b.is_complex() && !a.is_complex()
            || matches!(a, DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Bool | DType::UInt8 | DType::Int8 | DType::Int16 | DType::UInt16)
            || a.is_float8();
        prop_assume!(single_rounding);
        for e in elements(&src, a) {
            // One exception, torch's own: its e8m0 encoder rounds f32 subnormals (below 2^-126)
            // on their stored bits, not their value (1.016 * 2^-127 becomes 2^-126, where the
            // nearest power of two is 2^-127), so Torch and the correctly rounding Saturate differ.
            let e8m0_subnormal = b == DType::Float8E8M0Fnu && value(&e, a).0.abs() < 2f64.powi(-126);
            if cast_one(&e, a, b, CastMode::Checked).is_ok() && !is_nan(&e, a) && !e8m0_subnormal {
                let t = cast_one(&e, a, b, CastMode::Torch).unwrap();
                let s = cast_one(&e, a, b, CastMode::Saturate).unwrap();
                prop_assert_eq!(t, s, "{} -> {} on {:02x?}", a, b, e);
            }
        }
    }

    #[test]
    fn a_buffer_casts_like_its_pieces((a, b, src) in pair_and_buffer(40), cut in any::<prop::sample::Index>(), mode in proptest::sample::select(CastMode::ALL.to_vec())) {
        // Cut at a whole number of bytes on both sides: a multiple of 8 elements if one is packed.
        let step = if a.is_packed() || b.is_packed() { 8 } else { 1 };
        let n = a.elements_in(src.len()).unwrap() / step;
        let k = a.storage_bytes(cut.index(n + 1) * step).unwrap();
        let whole = cast_to_vec(&src, a, b, mode);
        let parts = cast_to_vec(&src[..k], a, b, mode).and_then(|mut x| {
            x.extend(cast_to_vec(&src[k..], a, b, mode)?);
            Ok(x)
        });
        match (whole, parts) {
            (Ok(w), Ok(p)) => prop_assert_eq!(w, p),
            (Err(_), Err(_)) => {}
            (w, p) => prop_assert!(false, "whole {:?} vs pieces {:?}", w.is_ok(), p.is_ok()),
        }
    }
}

#[test]
fn threads_do_not_change_the_bytes() {
    // Big enough to be split into tasks; compare a 1-thread pool with a 2-thread pool for every
    // pair out of float32 and into float32.
    let n = 200_008; // whole bytes of every packed dtype
    let src: Vec<u8> = (0..n * 16)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8)
        .collect();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for dt in DType::ALL {
        for (a, b) in [(DType::Float32, dt), (dt, DType::Float32)] {
            if !(a.storage_bytes(n).is_ok() && b.storage_bytes(n).is_ok()) {
                continue;
            }
            let Ok(bytes) = a.storage_bytes(n).map(|len| &src[..len]) else {
                continue;
            };
            if a == DType::Float4E2M1FnX2 || b == DType::Float4E2M1FnX2 {
                continue; // no value casts
            }
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let x = one.install(|| cast_to_vec(bytes, a, b, mode).unwrap());
                let y = two.install(|| cast_to_vec(bytes, a, b, mode).unwrap());
                assert!(
                    x == y,
                    "{a} -> {b} ({mode}) differs between 1 and 2 threads"
                );
            }
        }
    }
}
