//! compressed-tensors' MXFP6 (`mxfp6-pack-quantized`: float6 E2M3 codes four in three bytes, an
//! E8M0 scale per 32) read as compressed-tensors 0.20 reads it: `fixtures/ct_mxfp6/` (written
//! and dequantized by compressed-tensors itself, `scripts/ct_mxfp6_fixture.py`) converts to its
//! reference byte for byte.

use dtcast::DType;

type Tensors = Vec<dtcast_tests::NamedTensor>;
use dtcast_tests::read_sorted;

/// The fixture's model (with its config.json where `config`) converted to `dtype`.
fn convert(config: bool, dtype: &str) -> Result<Tensors, String> {
    let src = dtcast_tests::fixture_path("ct_mxfp6");
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::copy(
        src.join("model.safetensors"),
        model.join("model.safetensors"),
    )
    .unwrap();
    if config {
        std::fs::copy(src.join("config.json"), model.join("config.json")).unwrap();
    }
    let out = dir.path().join("out");
    let o = dtcast_tests::dtcast_cli(
        &[
            "convert",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--dtype",
            dtype,
        ],
        "",
    );
    if o.code != 0 {
        return Err(o.stderr);
    }
    Ok(read_sorted(&out.join("model.safetensors")))
}

#[test]
fn mxfp6_dequantizes_to_compressed_tensors_own_result() {
    // Every code, saturated elements, subnormal products, and scale bytes up to 255 (2^128,
    // which compressed-tensors reads as infinity) — with its config.json and without it (the
    // packed width against the scales' says float6).
    let want = read_sorted(&dtcast_tests::fixture_path(
        "ct_mxfp6/reference.safetensors",
    ));
    for config in [true, false] {
        let got = convert(config, "bfloat16").unwrap();
        assert!(got == want, "config.json: {config}");
    }
}

#[test]
fn other_dtypes_are_the_cast_of_compressed_tensors_result() {
    // bfloat16 widens exactly to float32; float16 is that float32 rounded once (half's
    // conversion, independent of dtcast's casts). A NaN stays a NaN.
    use dtcast::prelude::{bf16, f16};
    let want = read_sorted(&dtcast_tests::fixture_path(
        "ct_mxfp6/reference.safetensors",
    ));
    let wide = |b: &[u8]| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
    let got = convert(true, "float32").unwrap();
    for (g, w) in got.iter().zip(&want) {
        for (x, y) in g.3.chunks(4).zip(w.3.chunks(2)) {
            let (x, y) = (f32::from_le_bytes([x[0], x[1], x[2], x[3]]), wide(y));
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{}",
                g.0
            );
        }
    }
    let got = convert(true, "float16").unwrap();
    for (g, w) in got.iter().zip(&want) {
        for (x, y) in g.3.chunks(2).zip(w.3.chunks(2)) {
            let (x, y) = (
                f16::from_bits(u16::from_le_bytes([x[0], x[1]])),
                f16::from_f32(wide(y)),
            );
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{}",
                g.0
            );
        }
    }
}

#[test]
fn mxfp6_is_read_not_written() {
    // `--quantize` does not offer it, and the library refuses it by name.
    let scheme = dtcast::quant::Scheme::named("ct_mxfp6", DType::BFloat16).unwrap();
    let e = dtcast::quant::quantize(&[0u8; 64], DType::BFloat16, &[1, 32], &scheme).unwrap_err();
    assert!(
        e.to_string()
            .contains("MXFP6 (ct_mxfp6) is read, not written"),
        "{e}"
    );
}
