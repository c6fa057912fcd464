//! Casts with the low-precision dtypes against ml_dtypes 0.7 (`fixtures/lowp/casts.json.gz`):
//! every defined element of every pair the fixture records, in Torch mode (torch cannot cast any
//! of these pairs, so Torch mode is ml_dtypes' `astype`), through packed storage; and the other
//! modes by independent reasoning.

use std::collections::BTreeMap;

use dtcast::cast::{cast, cast_to_vec, CastError, CastMode, ValueErrorKind};
use dtcast::dtype::packing;
use dtcast::DType;
use dtcast_tests::{dtype, fixture, hex, random_bytes};
use serde_json::Value;

/// Elements (one byte per element for packed dtypes, as the fixture writes them) as dtcast
/// stores them.
fn store(dt: DType, elements: &[Vec<u8>]) -> Vec<u8> {
    let flat: Vec<u8> = elements.concat();
    if !dt.is_packed() {
        return flat;
    }
    let mut packed = vec![0u8; dt.storage_bytes(flat.len()).expect("whole bytes")];
    packing::pack(dt, &flat, &mut packed).expect("pack");
    packed
}

/// dtcast's storage back to one element per entry (packed: one byte each).
fn load(dt: DType, bytes: &[u8], n: usize) -> Vec<Vec<u8>> {
    if dt.is_packed() {
        let mut codes = vec![0u8; n];
        packing::unpack(dt, bytes, &mut codes).expect("unpack");
        return codes.into_iter().map(|c| vec![c]).collect();
    }
    bytes
        .chunks(dt.byte_size().unwrap())
        .map(<[u8]>::to_vec)
        .collect()
}

/// The source values, repeated to a multiple of 8 elements (whole bytes of every dtype).
fn padded(values: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let n = values.len().next_multiple_of(8);
    values.iter().cycle().take(n).cloned().collect()
}

#[test]
fn torch_mode_is_ml_dtypes_astype_for_every_defined_element() {
    let data = fixture("lowp/casts.json.gz");
    let mut checked = 0usize;
    let mut pairs = 0usize;
    let mut failures: BTreeMap<(DType, DType), Vec<String>> = BTreeMap::new();
    for s in data["sources"].as_array().expect("sources") {
        let from = dtype(&s["src"]);
        let values: Vec<Vec<u8>> = s["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| hex(v.as_str().expect("hex")))
            .collect();
        let src_elements = padded(&values);
        let src = store(from, &src_elements);
        for (to_name, t) in s["to"].as_object().expect("to") {
            let to: DType = to_name.parse().expect("dtype");
            let got = cast_to_vec(&src, from, to, CastMode::Torch);
            // numpy with ml_dtypes 0.7 casts every pair (0.6 refused some): none is an error.
            assert!(t.get("error").is_none(), "{from} -> {to}: {t}");
            pairs += 1;
            let got = load(
                to,
                &got.expect("torch mode never fails"),
                src_elements.len(),
            );
            let undefined: Vec<u64> = t
                .get("undefined")
                .and_then(Value::as_array)
                .map(|u| u.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            for (i, want) in t["out"].as_array().expect("out").iter().enumerate() {
                if undefined.contains(&(i as u64)) {
                    continue;
                }
                checked += 1;
                let want = hex(want.as_str().expect("hex"));
                if got[i] != want {
                    failures.entry((from, to)).or_default().push(format!(
                        "{:02x?} -> {:02x?} (ml_dtypes {:02x?})",
                        values[i], got[i], want
                    ));
                }
            }
        }
    }
    let report: Vec<String> = failures
        .iter()
        .map(|((f, t), v)| {
            format!(
                "{f} -> {t}: {} wrong, e.g. {}",
                v.len(),
                v[..v.len().min(3)].join("; ")
            )
        })
        .collect();
    assert!(report.is_empty(), "{}", report.join("\n"));
    // Every pair the fixture records (numpy casts them all under ml_dtypes 0.7); every element
    // but the C-undefined float -> int ones.
    assert_eq!(pairs, 741);
    assert!(checked > 530_000, "{checked} elements");
}

/// float4_e2m1fn's values, code by code (OCP MX spec; `formats.json`).
const FLOAT4: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

fn f32_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn float4_packs_two_per_byte_low_nibble_first() {
    // torch's nvfp4 packing (formats.json): (1, 6), (0.5, -2), (-0, 3), (4, 0) -> 72 c1 58 06.
    let src = f32_bytes(&[1.0, 6.0, 0.5, -2.0, -0.0, 3.0, 4.0, 0.0]);
    let out = cast_to_vec(&src, DType::Float32, DType::Float4E2M1Fn, CastMode::Torch).unwrap();
    assert_eq!(out, [0x72, 0xC1, 0x58, 0x06]);
    let back = cast_to_vec(&out, DType::Float4E2M1Fn, DType::Float32, CastMode::Torch).unwrap();
    assert_eq!(back, src);
}

#[test]
fn the_modes_extend_to_float4_as_defined() {
    let src = f32_bytes(&[0.25, 0.75, 5.0, 7.0, 100.0, f32::INFINITY, f32::NAN, -0.0]);
    let cast4 = |mode| cast_to_vec(&src, DType::Float32, DType::Float4E2M1Fn, mode);
    let codes = |bytes: Vec<u8>| load(DType::Float4E2M1Fn, &bytes, 8).concat();
    // Torch (= ml_dtypes): ties to even (0.25 -> 0, 0.75 -> 1, 5 -> 4, 7 -> 6 would be odd: 8 is
    // out of range so it saturates), overflow and inf saturate, NaN -> -0.
    assert_eq!(
        codes(cast4(CastMode::Torch).unwrap()),
        [0, 2, 6, 7, 7, 7, 8, 8]
    );
    // Saturate: the same values, but NaN -> +0.
    assert_eq!(
        codes(cast4(CastMode::Saturate).unwrap()),
        [0, 2, 6, 7, 7, 7, 0, 8]
    );
    // Checked: 7 rounds past 6 (the tie goes to the even 8): overflow; element 3 is the first.
    let err = cast4(CastMode::Checked).unwrap_err();
    assert!(
        matches!(
            err,
            CastError::Value {
                index: 3,
                kind: ValueErrorKind::Overflow,
                ..
            }
        ),
        "{err}"
    );
    // Exact: 0.25 is not a float4 value.
    assert!(matches!(
        cast4(CastMode::Exact).unwrap_err(),
        CastError::Value { index: 0, .. }
    ));
    // Every float4 value passes Exact; NaN does not pass Checked (float4 has no NaN).
    let exact = f32_bytes(&FLOAT4);
    assert!(cast_to_vec(&exact, DType::Float32, DType::Float4E2M1Fn, CastMode::Exact).is_ok());
    let nan = f32_bytes(&[1.0, f32::NAN, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    let err =
        cast_to_vec(&nan, DType::Float32, DType::Float4E2M1Fn, CastMode::Checked).unwrap_err();
    assert!(
        matches!(
            err,
            CastError::Value {
                index: 1,
                kind: ValueErrorKind::NotFinite,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn int4_wraps_in_torch_mode_and_clamps_in_saturate() {
    let src = f32_bytes(&[100.0, -100.0, 7.9, -8.5]);
    let torch = cast_to_vec(&src, DType::Float32, DType::Int4, CastMode::Torch).unwrap();
    // 100 -> low bits 4, -100 -> -4 (0xC), 7.9 -> 7, -8.5 -> -8 (ml_dtypes: truncate, keep bits).
    assert_eq!(load(DType::Int4, &torch, 4).concat(), [4, 0xC, 7, 8]);
    let sat = cast_to_vec(&src, DType::Float32, DType::Int4, CastMode::Saturate).unwrap();
    assert_eq!(load(DType::Int4, &sat, 4).concat(), [7, 8, 7, 8]);
    let err = cast_to_vec(&src, DType::Float32, DType::Int4, CastMode::Checked).unwrap_err();
    assert!(matches!(
        err,
        CastError::Value {
            index: 0,
            kind: ValueErrorKind::OutOfRange,
            ..
        }
    ));
}

#[test]
fn packed_lengths_that_end_inside_a_byte_are_errors() {
    // 3 float32 values make 12 bits of int4 storage: refused, nothing written.
    let src = f32_bytes(&[1.0, 2.0, 3.0]);
    let err = cast_to_vec(&src, DType::Float32, DType::Int4, CastMode::Torch).unwrap_err();
    assert_eq!(
        err.to_string(),
        "3 int4 elements (4 bits each) do not end at a byte boundary"
    );
    // 2 bytes of float6 are 2.67 elements.
    let mut dst = [0u8; 8];
    let err = cast(
        &[0, 0],
        DType::Float6E2M3Fn,
        &mut dst,
        DType::UInt8,
        CastMode::Torch,
    )
    .unwrap_err();
    assert!(matches!(err, CastError::PartialElement { .. }), "{err}");
}

#[test]
fn float4_e2m1fn_x2_casts_only_to_itself() {
    let err = cast_to_vec(
        &[0x72],
        DType::Float4E2M1FnX2,
        DType::Float32,
        CastMode::Torch,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("view its bytes as float4_e2m1fn"),
        "{err}"
    );
    let same = cast_to_vec(
        &[0x72],
        DType::Float4E2M1FnX2,
        DType::Float4E2M1FnX2,
        CastMode::Exact,
    );
    assert_eq!(same.unwrap(), [0x72]);
}

#[test]
fn large_packed_casts_agree_with_the_reference_in_every_mode() {
    // Across threads and blocks: cast (read first), cast_to_vec (one pass) and the scalar
    // reference give the same bytes or the same first error.
    let n = 300_000;
    let values: Vec<f32> = (0..n)
        .map(|i| ((i * 7919) % 2001) as f32 / 100.0 - 10.0)
        .collect();
    let src = f32_bytes(&values);
    for to in [
        DType::Float4E2M1Fn,
        DType::Float6E3M2Fn,
        DType::Int4,
        DType::UInt2,
        DType::Int1,
    ] {
        for mode in [
            CastMode::Torch,
            CastMode::Saturate,
            CastMode::Checked,
            CastMode::Exact,
        ] {
            let bytes = to.storage_bytes(n).unwrap();
            let (mut a, mut b) = (vec![0u8; bytes], vec![0u8; bytes]);
            let fast = cast(&src, DType::Float32, &mut a, to, mode);
            let reference = dtcast::cast::cast_reference(&src, DType::Float32, &mut b, to, mode);
            assert_eq!(fast, reference, "{to} {mode}");
            assert_eq!(
                cast_to_vec(&src, DType::Float32, to, mode).err(),
                fast.clone().err(),
                "{to} {mode}"
            );
            if fast.is_ok() {
                assert_eq!(a, b, "{to} {mode}");
                // And back: packed source, unpacked destination.
                let back = cast_to_vec(&a, to, DType::Float32, CastMode::Torch).unwrap();
                let mut back_ref = vec![0u8; n * 4];
                dtcast::cast::cast_reference(
                    &a,
                    to,
                    &mut back_ref,
                    DType::Float32,
                    CastMode::Torch,
                )
                .unwrap();
                assert_eq!(back, back_ref, "{to} back");
            }
        }
    }
}

#[test]
fn exact_casts_into_packed_floats_clear_whole_blocks_and_find_the_first_inexact_element() {
    // Every value of the format (both zeros) repeated over many blocks and both threads passes
    // Exact with the reference's bytes; one element that is not a value (a NaN, an overflow, a
    // value between two codes, a subnormal float32), late in the buffer, is the error the
    // reference names. Exact's screen casts each block there and back with the SIMD kernels,
    // which read and write the middle packed.
    let n = 262_144;
    for to in [
        DType::Float4E2M1Fn,
        DType::Float6E2M3Fn,
        DType::Float6E3M2Fn,
    ] {
        let codes = 1usize << to.bits();
        let code_bytes: Vec<u8> = (0..n).map(|i| ((i * 37) % codes) as u8).collect();
        let mut packed = vec![0u8; to.storage_bytes(n).unwrap()];
        packing::pack(to, &code_bytes, &mut packed).unwrap();
        let values = cast_to_vec(&packed, to, DType::Float32, CastMode::Torch).unwrap();
        let mut out = vec![0u8; packed.len()];
        cast(&values, DType::Float32, &mut out, to, CastMode::Exact).unwrap();
        assert_eq!(out, packed, "{to}: the values back as their codes");
        for bad in [f32::NAN, 1e6, 0.3, 1e-40] {
            let mut src = values.clone();
            let at = n - 1000 + 3;
            src[4 * at..4 * at + 4].copy_from_slice(&bad.to_le_bytes());
            let fast = cast(&src, DType::Float32, &mut out, to, CastMode::Exact);
            let reference = dtcast::cast::cast_reference(
                &src,
                DType::Float32,
                &mut vec![0; out.len()],
                to,
                CastMode::Exact,
            );
            assert!(fast.is_err(), "{to}: {bad} passed Exact");
            assert_eq!(fast, reference, "{to}: {bad}");
            assert_eq!(
                cast_to_vec(&src, DType::Float32, to, CastMode::Exact).err(),
                fast.err(),
                "{to}: {bad}, allocating"
            );
        }
    }
}

/// A value as Python's `float.hex` (or `nan`, `-nan`, `inf`, `-0.0`) writes it.
fn py_float(s: &str) -> f64 {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let magnitude = match body {
        "nan" => f64::NAN,
        "inf" => f64::INFINITY,
        "0.0" => 0.0,
        _ => {
            let hex = body.strip_prefix("0x").expect("float.hex");
            let (mantissa, exponent) = hex.split_once('p').expect("exponent");
            let (int, frac) = mantissa.split_once('.').expect("point");
            assert_eq!(frac.len(), 13, "{s}");
            let m = u64::from_str_radix(int, 16).unwrap() << 52
                | u64::from_str_radix(frac, 16).unwrap();
            m as f64 * 2f64.powi(exponent.parse::<i32>().unwrap() - 52)
        }
    };
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

#[test]
fn every_code_decodes_to_ml_dtypes_value_and_the_formats_match_finfo() {
    let data = fixture("lowp/formats.json");
    let mut codes_checked = 0;
    for (name, facts) in data["dtypes"].as_object().expect("dtypes") {
        let dt: DType = name.parse().expect("dtype");
        assert_eq!(dt.bits() as u64, facts["bits"].as_u64().unwrap(), "{dt}");
        let values = facts["values"].as_array().expect("values");
        assert_eq!(values.len(), 1 << dt.bits(), "{dt}");
        // Every code, packed, to float64.
        let codes: Vec<Vec<u8>> = (0..values.len()).map(|c| vec![c as u8]).collect();
        let src = store(dt, &padded(&codes));
        let out = cast_to_vec(&src, dt, DType::Float64, CastMode::Torch).unwrap();
        for (code, want) in values.iter().enumerate() {
            let got = f64::from_le_bytes(out[8 * code..8 * code + 8].try_into().unwrap());
            let want = match want {
                Value::String(s) => py_float(s),
                other => other.as_f64().expect("integer value"),
            };
            let same = got.to_bits() == want.to_bits()
                || (got.is_nan()
                    && want.is_nan()
                    && got.is_sign_negative() == want.is_sign_negative());
            assert!(same, "{dt} code {code:#x}: {got} (ml_dtypes {want})");
            codes_checked += 1;
        }
        if let Some(f) = dt.float_format() {
            assert_eq!(
                u64::from(f.exponent_bits),
                facts["exponent_bits"].as_u64().unwrap(),
                "{dt}"
            );
            assert_eq!(
                u64::from(f.mantissa_bits),
                facts["mantissa_bits"].as_u64().unwrap(),
                "{dt}"
            );
            assert_eq!(i64::from(f.bias), facts["bias"].as_i64().unwrap(), "{dt}");
            assert_eq!(f.has_inf, facts["has_inf"].as_bool().unwrap(), "{dt}");
            assert_eq!(f.max_finite, facts["max"].as_f64().unwrap(), "{dt}");
            assert_eq!(
                f.min_normal,
                facts["smallest_normal"].as_f64().unwrap(),
                "{dt}"
            );
            assert_eq!(
                f.min_subnormal,
                facts["smallest_subnormal"].as_f64(),
                "{dt}"
            );
            assert_eq!(
                f.has_negative_zero,
                facts["has_negative_zero"].as_bool().unwrap(),
                "{dt}"
            );
            assert_eq!(
                f.nan != dtcast::dtype::NanEncoding::None,
                facts["has_nan"].as_bool().unwrap(),
                "{dt}"
            );
        } else {
            assert_eq!(dt.is_signed(), facts["signed"].as_bool().unwrap(), "{dt}");
        }
    }
    assert_eq!(
        codes_checked,
        4 * 256 + 2 * 64 + 16 + 2 * 16 + 2 * 4 + 2 * 2
    );
}

/// The hot pairs with a dtype that torch cannot cast on either side (ml_dtypes' rules).
fn ml_hot_pairs() -> Vec<(DType, DType)> {
    use dtcast::cast::hot_pairs;
    use dtcast::dtype::TorchSupport;
    hot_pairs()
        .iter()
        .copied()
        .filter(|(from, to)| {
            from.torch_support() != TorchSupport::Casts || to.torch_support() != TorchSupport::Casts
        })
        .collect()
}

#[test]
fn simd_casts_of_ml_dtypes_match_the_scalar_rules_on_every_isa() {
    use dtcast::cast::{cast_reference, cast_with_isa, isas};
    let pairs = ml_hot_pairs();
    // 20 narrowings (float32/bfloat16/float16 into float8_e4m3, float8_e3m4, float8_e5m3fnu,
    // float6 x2, float4; float32 into int4/uint4) and 20 widenings back (into float32, bfloat16
    // and float16; the 4-bit integers into float32).
    assert_eq!(pairs.len(), 40);
    // Every 16-bit pattern; for float32, every value of the fixture's float32 source (each
    // representable value, tie and overflow tie of every new format, specials), every top half
    // with three low halves, and random bits;
    // for the narrow sources every code, many times over, then random bits.
    let every16: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_le_bytes).collect();
    let data = fixture("lowp/casts.json.gz");
    let f32_source = data["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["src"] == "float32")
        .unwrap();
    let mut f32_bytes: Vec<u8> = f32_source["values"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|v| hex(v.as_str().unwrap()))
        .collect();
    // Every top 16 bits with the low 16 clear, lowest set, all set: ties, values just past them
    // and values just below the next — what a rounding that looks at the top bits and a sticky bit
    // (the portable kernels' tables) must tell apart.
    f32_bytes.extend(
        (0..=u16::MAX)
            .flat_map(|top| [0, 1, 0xFFFF].map(|low| u32::from(top) << 16 | low))
            .flat_map(u32::to_le_bytes),
    );
    f32_bytes.extend(random_bytes(4 << 20, 0x9E37_79B9_7F4A_7C15));
    f32_bytes.truncate(f32_bytes.len() / 16 * 16); // whole float6 groups (4 elements)
    let mut narrow: Vec<u8> = (0..=255u8).cycle().take(3 * 4096).collect();
    narrow.extend(random_bytes(3 << 20, 0x2545_F491_4F6C_DD1D));
    for (from, to) in pairs {
        let src = match from.bits() {
            32 => &f32_bytes,
            16 => &every16,
            _ => &narrow,
        };
        let n = from.elements_in(src.len()).unwrap();
        for mode in [CastMode::Torch, CastMode::Saturate] {
            let mut want = vec![0u8; to.storage_bytes(n).unwrap()];
            cast_reference(src, from, &mut want, to, mode).unwrap();
            for isa in isas() {
                let mut got = vec![0u8; want.len()];
                cast_with_isa(src, from, &mut got, to, mode, isa).unwrap();
                let first = got.iter().zip(&want).position(|(g, w)| g != w);
                assert!(
                    first.is_none(),
                    "{from} -> {to} ({mode}, {isa}): byte {first:?} differs"
                );
            }
        }
    }
}

#[test]
fn packed_simd_casts_match_at_every_length_and_alignment() {
    // The SIMD kernels read and write packed sides packed, with scalar elements before the first
    // aligned vector and after the last whole step: every length up to a few steps, at every
    // byte offset of either buffer within a cache line, into and out of float4/float6/int4 —
    // and float8, whose pairs the portable set looks up in tables, as it does the packed ones.
    use dtcast::cast::{cast_into_scratch, cast_reference, cast_with_isa, isas, Isa};
    let pairs = ml_hot_pairs();
    let bytes = random_bytes(1 << 18, 0x1234_5678_9ABC_DEF1);
    for (from, to) in pairs {
        // One long cast first, on one thread: the portable set builds its tables on the first
        // kernel call of 4,096 elements or more, and uses them for every cast after it, short
        // ones included.
        let long = 1 << 16;
        let src = &bytes[..from.storage_bytes(long).unwrap()];
        let mut out = vec![0u8; to.storage_bytes(long).unwrap()];
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        one_thread
            .install(|| cast_with_isa(src, from, &mut out, to, CastMode::Torch, Isa::Portable))
            .unwrap();
        // Lengths in whole bytes on both sides (float6: groups of 4 elements).
        for n in (0..600).step_by(4).chain([4096, 4100, 12_000]) {
            for offset in [0usize, 1, 3, 17, 32, 63] {
                let src = &bytes[offset..offset + from.storage_bytes(n).unwrap()];
                let mut want = vec![0u8; to.storage_bytes(n).unwrap()];
                cast_reference(src, from, &mut want, to, CastMode::Torch).unwrap();
                for isa in isas() {
                    let mut out = vec![0u8; want.len() + 64];
                    let got = &mut out[offset..offset + want.len()];
                    cast_with_isa(src, from, got, to, CastMode::Torch, isa).unwrap();
                    assert!(
                        got == want.as_slice(),
                        "{from} -> {to} ({isa}): {n} elements at offset {offset}"
                    );
                }
                // The streaming kernels of the one-pass path (destinations written block by block).
                let mut got = vec![0u8; want.len()];
                cast_into_scratch(src, from, &mut got, to, CastMode::Saturate).unwrap();
                let mut saturated = vec![0u8; want.len()];
                cast_reference(src, from, &mut saturated, to, CastMode::Saturate).unwrap();
                assert!(
                    got == saturated,
                    "{from} -> {to} (saturate, one pass): {n} elements at offset {offset}"
                );
            }
        }
    }
}

#[test]
fn float8_e5m3fnu_has_no_sign_and_the_modes_say_what_happens_below_zero() {
    // ml_dtypes 0.7's float8_e5m3fnu: no sign bit, bias 15, max 1.75 * 2^16 = 114688 (0xFE),
    // 0xFF its only NaN, no infinity (formats.json). 1.0 is 0x78 (exponent 15, mantissa 0);
    // 118784 = 1.8125 * 2^16 is the tie above the max, which rounds to the even 0xFE; 118785 is
    // past it; 2^-17 is the smallest subnormal (0x01).
    let values = [
        1.0f32,
        -2.0,
        -0.0,
        114_688.0,
        118_784.0,
        118_785.0,
        f32::INFINITY,
        f32::NAN,
        2f32.powi(-17),
        -(2f32.powi(-30)),
    ];
    let src = f32_bytes(&values);
    let cast8 = |mode| cast_to_vec(&src, DType::Float32, DType::Float8E5M3Fnu, mode);
    // Torch (= ml_dtypes): a negative value is the NaN, even one that would round to 0; -0 is 0.
    assert_eq!(
        cast8(CastMode::Torch).unwrap(),
        [0x78, 0xFF, 0x00, 0xFE, 0xFE, 0xFF, 0xFF, 0xFF, 0x01, 0xFF]
    );
    // Saturate: below zero is the lowest value, 0; past the max (and inf) the max; NaN stays.
    assert_eq!(
        cast8(CastMode::Saturate).unwrap(),
        [0x78, 0x00, 0x00, 0xFE, 0xFE, 0xFE, 0xFE, 0xFF, 0x01, 0x00]
    );
    // Checked and Exact refuse -2.0 first (element 1).
    for mode in [CastMode::Checked, CastMode::Exact] {
        let err = cast8(mode).unwrap_err();
        assert!(
            matches!(err, CastError::Value { index: 1, .. }),
            "{mode}: {err}"
        );
    }
    // Without the negative values, Checked takes the tie 118784 (it rounds into range) and
    // refuses 118785 (overflow).
    let src = f32_bytes(&[1.0, 118_784.0, 118_785.0]);
    let err = cast_to_vec(
        &src,
        DType::Float32,
        DType::Float8E5M3Fnu,
        CastMode::Checked,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            CastError::Value {
                index: 2,
                kind: ValueErrorKind::Overflow,
                ..
            }
        ),
        "{err}"
    );
    // Back: 0xFF reads as NaN, every other code as its value.
    let back = cast_to_vec(
        &[0x78, 0xFE, 0x01, 0xFF],
        DType::Float8E5M3Fnu,
        DType::Float32,
        CastMode::Torch,
    )
    .unwrap();
    let back: Vec<f32> = back
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(&back[..3], &[1.0, 114_688.0, 2f32.powi(-17)]);
    assert!(back[3].is_nan());
}

#[test]
fn the_pairs_torch_cannot_cast_are_the_ones_torch_mode_gives_ml_dtypes_rules() {
    // fixtures/lowp/torch_casts.json: torch 2.15's `tensor.to` for every pair with one of its
    // storage-only dtypes. Every one but the identity fails there; so dtcast's table must not say
    // that torch casts both sides (where it does, Torch mode is torch's bytes, not ml_dtypes').
    use dtcast::dtype::TorchSupport;
    let data = fixture("lowp/torch_casts.json");
    assert_eq!(data["nonidentity_successes"], serde_json::json!([]));
    let mut checked = 0;
    for row in data["rows"].as_array().expect("rows") {
        let name = |k: &str| row[k].as_str().expect("a dtype name");
        let (Ok(from), Ok(to)) = (name("from").parse::<DType>(), name("to").parse::<DType>())
        else {
            continue; // int3, uint5...: dtypes dtcast does not have
        };
        let fails = row["result"]
            .as_str()
            .is_some_and(|r| r.starts_with("error"));
        assert_eq!(fails, from != to, "{from} -> {to}: {}", row["result"]);
        if from != to {
            checked += 1;
            assert!(
                from.torch_support() != TorchSupport::Casts
                    || to.torch_support() != TorchSupport::Casts,
                "{from} -> {to}"
            );
        }
    }
    assert!(checked >= 350, "{checked} pairs");
}
