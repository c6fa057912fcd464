//! Integer-quantized checkpoints (GPTQ, AWQ, compressed-tensors' integers, bitsandbytes) read as their own
//! tools read them: every case of `fixtures/intq/` (written by the real tools, dequantized by
//! their own code) converts to its reference tensor for tensor and byte for byte.

use dtcast::layer::checkpoint::{convert_file, ConvertOptions};
use dtcast::DType;
use std::path::{Path, PathBuf};

/// The integer cases dtcast reads, with the dtype their reference was computed in.
const CASES: [(&str, DType); 17] = [
    ("gptq_b4_g128", DType::Float16),
    ("gptq_b4_g128_act", DType::Float16),
    ("gptq_b4_gch", DType::Float16),
    ("gptq_b8_g64", DType::Float16),
    ("gptq_b2_g128_act", DType::Float16),
    ("awq_gemm_g128", DType::Float16),
    ("awq_gemm_g64", DType::Float16),
    ("ct_w4a16_g128", DType::BFloat16),
    ("ct_w4a16_asym", DType::BFloat16),
    ("ct_w8a16_g128", DType::BFloat16),
    ("ct_w2a16", DType::BFloat16),
    ("ct_w8a8_channel", DType::BFloat16),
    ("bnb_nf4", DType::BFloat16),
    ("bnb_nf4_dq", DType::BFloat16),
    ("bnb_fp4", DType::BFloat16),
    ("bnb_fp4_dq", DType::BFloat16),
    // (LLM.int8's own result is float32; the reference is it rounded to the model's float16.)
    ("bnb_int8", DType::Float16),
];

type Tensors = Vec<dtcast_tests::NamedTensor>;
use dtcast_tests::read_sorted;

/// `dtcast convert INPUT -o OUT FLAGS...` through the CLI.
fn convert_cli(input: &Path, out: &Path, flags: &[&str]) -> dtcast_tests::CliOutput {
    let mut args = vec![
        "convert",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    dtcast_tests::dtcast_cli(&args, "")
}

fn case(name: &str) -> PathBuf {
    dtcast_tests::fixture_path(&format!("intq/{name}"))
}

/// A copy of case `name`'s model (with its config.json unless `config` is false) in a fresh
/// directory.
fn copy_case(name: &str, config: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = case(name);
    std::fs::copy(
        src.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    if config {
        std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    }
    dir
}

fn convert(dir: &Path, dtype: DType) -> Result<Tensors, String> {
    let out = dir.join("out.safetensors");
    let summary = convert_file(
        &dir.join("model.safetensors"),
        &out,
        &ConvertOptions::new(dtype),
        &|_, _| {},
    )
    .map_err(|e| e.to_string())?;
    assert!(summary.dequantized > 0, "nothing dequantized");
    Ok(read_sorted(&out))
}

/// The tensors that differ between two files' contents, by name, dtype, shape and bytes.
fn differences(got: &Tensors, want: &Tensors) -> Vec<String> {
    let names = |v: &Tensors| v.iter().map(|t| t.0.clone()).collect::<Vec<_>>();
    if names(got) != names(want) {
        return vec![format!("names {:?} != {:?}", names(got), names(want))];
    }
    (got.iter().zip(want))
        .filter(|(g, w)| g != w)
        .map(|(g, w)| {
            let differ = (g.3.chunks(2).zip(w.3.chunks(2)))
                .filter(|(a, b)| a != b)
                .count();
            format!(
                "{} ({} {:?} vs {} {:?}): {differ} elements differ",
                g.0, g.1, g.2, w.1, w.2
            )
        })
        .collect()
}

#[test]
fn every_integer_case_dequantizes_to_its_tools_own_result() {
    for (name, dtype) in CASES {
        let dir = copy_case(name, true);
        let got = convert(dir.path(), dtype).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = read_sorted(&case(name).join("reference.safetensors"));
        let bad = differences(&got, &want);
        assert!(bad.is_empty(), "{name}:\n{}", bad.join("\n"));
    }
}

#[test]
fn without_config_json_the_tensors_alone_say_the_format() {
    // GPTQ's bits from its g_idx (the input width), its groups from its scales; AWQ by its
    // qweight's shape; compressed-tensors' bits from weight_shape. (GPTQ's zeros are then read
    // as its default `gptq` checkpoint format, which these are.)
    for (name, dtype) in CASES {
        let dir = copy_case(name, false);
        let got = convert(dir.path(), dtype).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = read_sorted(&case(name).join("reference.safetensors"));
        let bad = differences(&got, &want);
        assert!(
            bad.is_empty(),
            "{name} without config.json:\n{}",
            bad.join("\n")
        );
    }
}

#[test]
fn other_dtypes_are_the_cast_of_the_formats_own_result() {
    // float16 to float32 is exact, so GPTQ's float32 output is its float16 result widened; and
    // bfloat16 to float32 likewise for compressed-tensors. (Independent of dtcast's rounding.)
    let widen = |bits: u16, from: DType| -> f32 {
        match from {
            DType::Float16 => dtcast::prelude::f16::from_bits(bits).to_f32(),
            _ => dtcast::prelude::bf16::from_bits(bits).to_f32(),
        }
    };
    for (name, dtype) in [CASES[1], CASES[8]] {
        let dir = copy_case(name, true);
        let got = convert(dir.path(), DType::Float32).unwrap();
        let want = read_sorted(&case(name).join("reference.safetensors"));
        for (g, w) in got.iter().zip(&want) {
            if w.1 != dtype {
                continue;
            }
            assert_eq!(g.1, DType::Float32, "{name}: {}", g.0);
            let wide: Vec<u8> = (w.3.chunks(2))
                .flat_map(|b| widen(u16::from_le_bytes([b[0], b[1]]), dtype).to_le_bytes())
                .collect();
            assert!(g.3 == wide, "{name}: {} is not its reference widened", g.0);
        }
    }
}

/// Case `name`'s model with `change` applied to its tensors (name, dtype, shape, bytes), saved
/// in a fresh directory with its config.json.
fn altered(name: &str, change: impl FnOnce(&mut Tensors)) -> tempfile::TempDir {
    altered_at(&case(name), change)
}

/// [`altered`] for the case in directory `src`.
fn altered_at(src: &Path, change: impl FnOnce(&mut Tensors)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let mut tensors = read_sorted(&src.join("model.safetensors"));
    change(&mut tensors);
    let tensors: Vec<(String, dtcast::Tensor)> = (tensors.into_iter())
        .map(|(n, d, s, b)| (n, dtcast::Tensor::from_bytes(&b, d, &s).unwrap()))
        .collect();
    dtcast::layer::checkpoint::save(dir.path().join("model.safetensors"), &tensors, &[]).unwrap();
    dir
}

fn tensor<'a>(t: &'a mut Tensors, name: &str) -> &'a mut (String, DType, Vec<usize>, Vec<u8>) {
    t.iter_mut().find(|x| x.0 == name).unwrap()
}

/// Converting `dir`'s model fails with a message containing each of `says`, and writes nothing.
fn refused(dir: &Path, says: &[&str]) {
    let e = convert(dir, DType::BFloat16).unwrap_err();
    for s in says {
        assert!(e.contains(s), "{e}\n(expected it to say {s:?})");
    }
    assert!(!dir.join("out.safetensors").exists());
}

const Q: &str = "model.layers.0.self_attn.q_proj";

#[test]
fn a_group_index_out_of_range_is_refused() {
    let dir = altered("gptq_b4_g128_act", |t| {
        let g = tensor(t, &format!("{Q}.g_idx"));
        g.3[4..8].copy_from_slice(&5i32.to_le_bytes());
    });
    refused(dir.path(), &["group index of column 1 is 5", "1 groups"]);
}

#[test]
fn qzeros_of_the_wrong_shape_are_refused() {
    let dir = altered("gptq_b4_g128", |t| {
        let z = tensor(t, &format!("{Q}.qzeros"));
        z.2 = vec![2, 8];
    });
    refused(dir.path(), &["qzeros` is int32 [2, 8]", "as int32 [1, 16]"]);
}

#[test]
fn bits_not_in_the_set_are_refused() {
    let dir = copy_case("gptq_b4_g128", true);
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("\"bits\": 4", "\"bits\": 5");
    std::fs::write(&config, text).unwrap();
    refused(dir.path(), &["5-bit GPTQ codes", "2, 3, 4 or 8 bits"]);
}

#[test]
fn a_packed_weight_shorter_than_its_shape_is_refused() {
    let dir = altered("ct_w4a16_g128", |t| {
        let s = tensor(t, &format!("{Q}.weight_shape"));
        s.3[8..16].copy_from_slice(&200i64.to_le_bytes());
    });
    refused(
        dir.path(),
        &["weight_packed` is [128, 16]", "for 200 columns"],
    );
}

#[test]
fn a_config_that_contradicts_the_tensors_is_refused() {
    let dir = copy_case("ct_w4a16_g128", true);
    let config = dir.path().join("config.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("\"num_bits\": 4", "\"num_bits\": 8");
    std::fs::write(&config, text).unwrap();
    refused(
        dir.path(),
        &["is [128, 32]; for 256 columns, config.json's 8-bit codes take 64 int32 words a row"],
    );
}

#[test]
fn inspect_names_scheme_bits_groups_symmetry_and_act_order() {
    let file = case("gptq_b4_g128_act").join("model.safetensors");
    let o = dtcast_tests::dtcast_cli(&["inspect", file.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("quantized: 8 weights (gptq)"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(&format!(
            "  {Q}.weight  gptq  4-bit integers with zero points, float16 scales [1, 128] (a \
             scale per 128 elements of a row; groups by its g_idx)"
        )),
        "{}",
        o.stdout
    );
    let file = case("ct_w4a16_g128").join("model.safetensors");
    let o = dtcast_tests::dtcast_cli(&["inspect", file.to_str().unwrap()], "");
    assert!(
        o.stdout.contains(&format!(
            "  {Q}.weight  ct_pack_quantized  4-bit integers symmetric, bfloat16 scales [128, 1] \
             (a scale per row)"
        )),
        "{}",
        o.stdout
    );
}

#[test]
fn a_bitsandbytes_quant_state_that_is_not_its_json_is_refused() {
    let state = format!("{Q}.weight.quant_state.bitsandbytes__nf4");
    let dir = altered("bnb_nf4", |t| {
        let s = tensor(t, &state);
        s.3 = b"{\"quant_type\": \"fp4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [128, 128]}".to_vec();
        s.2 = vec![s.3.len()];
    });
    refused(
        dir.path(),
        &["says `quant_type` fp4, not the nf4 its name says"],
    );
    let dir = altered("bnb_nf4", |t| {
        let s = tensor(t, &state);
        s.3 = b"{\"quant_type\": \"nf4\", \"blocksize\": 32, \"dtype\": \"bfloat16\", \"shape\": [128, 128]}".to_vec();
        s.2 = vec![s.3.len()];
    });
    refused(
        dir.path(),
        &[
            "weight.absmax` is float32 [256]",
            "in blocks of 32 stores 512 float32",
        ],
    );
    let dir = altered("bnb_nf4", |t| {
        let s = tensor(t, &state);
        s.3 = b"not json".to_vec();
        s.2 = vec![8];
    });
    refused(dir.path(), &["is not the JSON bitsandbytes writes"]);
}

#[test]
fn a_weights_zeros_and_group_index_may_be_in_another_shard() {
    // The tools that shard checkpoints cut between any two tensors: GPTQ's qzeros and g_idx,
    // bitsandbytes' quant state and nested absmax, compressed-tensors' weight_shape in the
    // other shard than their weight.
    for (name, dtype) in [CASES[1], CASES[8], CASES[13]] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            case(name).join("config.json"),
            dir.path().join("config.json"),
        )
        .unwrap();
        let index =
            dtcast_tests::two_shards(&case(name).join("model.safetensors"), dir.path(), |n| {
                n.ends_with("qweight") || n.ends_with("weight_packed") || n.ends_with(".weight")
            });
        let out = dir.path().join("out");
        let o = convert_cli(&index, &out, &["--dtype", dtype.name()]);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        let mut got: Tensors = Vec::new();
        for shard in [
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ] {
            got.extend(read_sorted(&out.join(shard)));
        }
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = read_sorted(&case(name).join("reference.safetensors"));
        let bad = differences(&got, &want);
        assert!(bad.is_empty(), "{name} sharded:\n{}", bad.join("\n"));
    }
}

#[test]
fn a_model_directory_dequantizes_and_its_config_says_so() {
    // Every weight dequantized: quantization_config goes, torch_dtype is the new dtype. One
    // module kept: the config stays and lists the other modules as dense where the format's
    // loader looks (bitsandbytes: llm_int8_skip_modules; compressed-tensors: ignore).
    for (name, dtype, key) in [
        ("bnb_nf4", DType::BFloat16, "llm_int8_skip_modules"),
        ("ct_w4a16_asym", DType::BFloat16, "ignore"),
        ("awq_gemm_g128", DType::Float16, "modules_to_not_convert"),
    ] {
        let dir = copy_case(name, true);
        let out = dir.path().join("out");
        let run = |extra: &[&str]| {
            let mut args = vec![
                "convert",
                dir.path().to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ];
            args.extend_from_slice(&["--dtype", dtype.name(), "--force"]);
            args.extend_from_slice(extra);
            dtcast_tests::dtcast_cli(&args, "")
        };
        let o = run(&[]);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert!(
            config.get("quantization_config").is_none(),
            "{name}: {config}"
        );
        assert_eq!(config["torch_dtype"], dtype.name(), "{name}");
        let keep = format!("{Q}.*");
        let o = run(&["--keep", &keep]);
        assert_eq!(o.code, 0, "{name}: {}", o.stderr);
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        let listed = config["quantization_config"][key].as_array().unwrap();
        assert!(
            listed.contains(&"model.layers.0.mlp.up_proj".into()) && !listed.contains(&Q.into()),
            "{name}: {key} = {listed:?}"
        );
        // The kept module's tensors are the input's, the others dense.
        let got = read_sorted(&out.join("model.safetensors"));
        let input = read_sorted(&case(name).join("model.safetensors"));
        let want = read_sorted(&case(name).join("reference.safetensors"));
        for t in &got {
            let from = if t.0.starts_with(Q) { &input } else { &want };
            assert!(
                from.contains(t),
                "{name}: {} is neither kept nor its reference",
                t.0
            );
        }
    }
}

#[test]
fn gptq_cannot_keep_some_weights_quantized() {
    // GPTQ's config has no list of modules stored dense: a loader would look for a qweight in
    // every module, so dequantizing only some would make a model that does not load.
    let dir = copy_case("gptq_b4_g128", true);
    let out = dir.path().join("out");
    let keep = format!("{Q}.*");
    let o = convert_cli(dir.path(), &out, &["--dtype", "f16", "--keep", &keep]);
    assert!(
        o.code != 0
            && o.stderr
                .contains("GPTQ's quantization_config has no list of modules stored dense"),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
}

#[test]
fn mixed_precision_integer_modules_read_from_their_tensors() {
    // compressed-tensors' `mixed-precision` format: modules of different formats, each known by
    // its tensors — int4 packed in int32 (`pack-quantized`) and int8 (`int-quantized`). Values
    // by hand: the word 0x12345678 holds the codes 8, 7, ..., 1 (least significant first), read
    // as signed q = code − 8 = 0, −1, ..., −7 under a bfloat16 scale; the int8 code −3 under a float32 scale is
    // −3 · 0.01 in float32, then bfloat16.
    use dtcast::layer::checkpoint::save;
    use dtcast::prelude::bf16;
    let dir = tempfile::tempdir().unwrap();
    let (w4, w8) = ("model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj");
    let tensors = vec![
        (
            format!("{w4}.weight_packed"),
            dtcast::Tensor::from_vec(vec![0x1234_5678i32; 16], &[4, 4]).unwrap(),
        ),
        (
            format!("{w4}.weight_scale"),
            dtcast::Tensor::from_vec(vec![bf16::from_f32(0.01); 4], &[4, 1]).unwrap(),
        ),
        (
            format!("{w4}.weight_shape"),
            dtcast::Tensor::from_vec(vec![4i32, 32], &[2]).unwrap(),
        ),
        (
            format!("{w8}.weight"),
            dtcast::Tensor::from_vec(vec![-3i8; 128], &[4, 32]).unwrap(),
        ),
        (
            format!("{w8}.weight_scale"),
            dtcast::Tensor::from_vec(vec![0.01f32; 4], &[4, 1]).unwrap(),
        ),
        // An int8 weight without a scale is no quantized weight.
        (
            "model.embed_tokens.weight".to_owned(),
            dtcast::Tensor::from_vec(vec![5i8; 8], &[2, 4]).unwrap(),
        ),
    ];
    save(dir.path().join("model.safetensors"), &tensors, &[]).unwrap();
    let config = r#"{"quantization_config": {"quant_method": "compressed-tensors",
        "format": "mixed-precision", "config_groups": {}}}"#;
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let got = convert(dir.path(), DType::BFloat16).unwrap();
    let bytes = |v: Vec<f32>| -> Vec<u8> {
        v.into_iter()
            .flat_map(|x| bf16::from_f32(x).to_le_bytes())
            .collect()
    };
    let scale = bf16::from_f32(0.01).to_f32();
    let row: Vec<f32> = (0..32).map(|c: i32| (-(c % 8)) as f32 * scale).collect();
    let want_w4 = bytes(row.repeat(4));
    let want_w8 = bytes(vec![-3.0 * 0.01f32; 128]);
    let find = |n: &str| got.iter().find(|t| t.0 == n).unwrap().clone();
    assert_eq!(
        find(&format!("{w4}.weight")),
        (
            format!("{w4}.weight"),
            DType::BFloat16,
            vec![4, 32],
            want_w4
        )
    );
    assert_eq!(
        find(&format!("{w8}.weight")),
        (
            format!("{w8}.weight"),
            DType::BFloat16,
            vec![4, 32],
            want_w8
        )
    );
    assert_eq!(find("model.embed_tokens.weight").1, DType::Int8);
    assert_eq!(
        got.len(),
        3,
        "{:?}",
        got.iter().map(|t| &t.0).collect::<Vec<_>>()
    );
}

/// compressed-tensors' integer presets, the cases they wrote, and dtcast's names for them.
const PRESETS: [(&str, &str); 5] = [
    ("w4a16", "ct_w4a16_g128"),
    ("w4a16-asym", "ct_w4a16_asym"),
    ("w8a16", "ct_w8a16_g128"),
    ("w2a16", "ct_w2a16"),
    ("w8a16-channel", "ct_w8a8_channel"),
];

#[test]
fn the_integer_presets_write_compressed_tensors_files() {
    // `--quantize` on the dense model each case started from gives the tool's file tensor for
    // tensor and byte for byte, and (given the model directory) its quantization_config.
    for (preset, name) in PRESETS {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("model");
        std::fs::create_dir(&model).unwrap();
        std::fs::copy(
            case(name).join("dense.safetensors"),
            model.join("model.safetensors"),
        )
        .unwrap();
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case(name).join("config.json")).unwrap())
                .unwrap();
        let mut dense_config = config.clone();
        dense_config
            .as_object_mut()
            .unwrap()
            .remove("quantization_config");
        std::fs::write(model.join("config.json"), dense_config.to_string()).unwrap();
        let out = dir.path().join("out");
        let o = convert_cli(&model, &out, &["--quantize", preset]);
        assert_eq!(o.code, 0, "{preset}: {}", o.stderr);
        let got = read_sorted(&out.join("model.safetensors"));
        let want = read_sorted(&case(name).join("model.safetensors"));
        let bad = differences(&got, &want);
        assert!(bad.is_empty(), "{preset}:\n{}", bad.join("\n"));
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(written, config, "{preset}: config.json");
    }
}

#[test]
fn a_group_size_of_its_own_gives_that_many_scales_and_reads_back_within_a_step() {
    // --group-size 64: the scales are [rows, cols / 64], and every element dequantized is within
    // a step (its group's scale; a little more for the bfloat16 rounding) of the weight it came
    // from — round-to-nearest moves an element by half a step, and rounding the zero point to an
    // integer moves the grid by at most another half.
    let name = "ct_w4a16_asym";
    let dir = tempfile::tempdir().unwrap();
    let dense = case(name).join("dense.safetensors");
    let q = dir.path().join("q.safetensors");
    let o = convert_cli(
        &dense,
        &q,
        &["--quantize", "w4a16-asym", "--group-size", "64"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let quantized = read_sorted(&q);
    let scale = quantized
        .iter()
        .find(|t| t.0 == format!("{Q}.weight_scale"))
        .unwrap();
    assert_eq!(scale.2, vec![128, 2]);
    let back = dir.path().join("back.safetensors");
    let o = convert_cli(&q, &back, &["--dtype", "float32"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let values = |t: &(String, DType, Vec<usize>, Vec<u8>)| -> Vec<f32> {
        match t.1 {
            DType::Float32 => {
                t.3.chunks(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect()
            }
            _ => {
                t.3.chunks(2)
                    .map(|b| dtcast::prelude::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect()
            }
        }
    };
    let original = read_sorted(&dense);
    let restored = read_sorted(&back);
    let w = |v: &Tensors, n: &str| values(v.iter().find(|t| t.0 == n).unwrap());
    let scales = values(scale);
    let (x, y) = (
        w(&original, &format!("{Q}.weight")),
        w(&restored, &format!("{Q}.weight")),
    );
    for (i, (a, b)) in x.iter().zip(&y).enumerate() {
        let s = scales[i / 128 * 2 + (i % 128) / 64];
        assert!(
            (a - b).abs() <= s * 1.01,
            "element {i}: {a} came back as {b} (scale {s})"
        );
    }
    // A group size that does not divide a weight's columns is refused before anything is
    // written.
    let bad = dir.path().join("bad.safetensors");
    let o = convert_cli(
        &dense,
        &bad,
        &["--quantize", "w4a16", "--group-size", "100"],
    );
    assert!(
        o.code != 0 && o.stderr.contains("not a multiple of the group size 100"),
        "{}",
        o.stderr
    );
    assert!(!bad.exists());
    // And it is for the grouped integer schemes only.
    let o = convert_cli(&dense, &bad, &["--quantize", "mxfp4", "--group-size", "64"]);
    assert!(
        o.code != 0
            && o.stderr
                .contains("--group-size 64: the group size is for the grouped integer schemes"),
        "{}",
        o.stderr
    );
}

/// Cases made by the real tools beyond `fixtures/intq/` (`fixtures/intq_added/`, each script's
/// docstring says how), with the dtype of their reference.
const ADDED: [(&str, DType); 17] = [
    // scripts/bnb_blocksize_fixtures.py, bitsandbytes 0.50.2: blocks of 32, 128, 256 and 4096
    // (the last one partial), double quantization over partial nested blocks, float16 weights,
    // rows that are not whole blocks.
    ("bnb_nf4_b32", DType::BFloat16),
    ("bnb_nf4_b128_dq", DType::BFloat16),
    ("bnb_fp4_b256_dq", DType::Float16),
    ("bnb_nf4_b4096_dq_f16", DType::Float16),
    // scripts/gptqmodel_fixtures.py, GPTQModel 7.7.0's packer and torch kernel: 3-bit codes
    // crossing words (with act-order too), and the `gptq_v2` format's zeros at 4 and 3 bits.
    ("gptq_b3_g128", DType::Float16),
    ("gptq_b3_g32_act", DType::Float16),
    ("gptq_v2_b4_g128", DType::Float16),
    ("gptq_v2_b3_g64_act", DType::Float16),
    // scripts/ct_actorder_fixture.py, compressed-tensors 0.18.0: `weight_g_idx` of a group
    // act-order (one module), and left at -1, read as column order (the other).
    ("ct_w4a16_asym_actorder", DType::BFloat16),
    // scripts/awq_gemv_fixtures.py, AutoAWQ 0.2.9's GEMV packer (its rows of zero points and
    // scales padded to 1, 2 and 4 words), against its GEMM dequantization of the same weight.
    ("awq_gemv_g128", DType::Float16),
    ("awq_gemv_g64", DType::Float16),
    ("awq_gemv_g32", DType::Float16),
    // scripts/autoround_fixtures.py, AutoRound 0.16.1's packers (`quant_method: auto-round`):
    // GPTQ's layout with zeros as stored (`auto_round`, 4 and 3 bits; `auto_round:gptqmodel`,
    // with a g_idx) or minus one (`auto_round:auto_gptq`), and AutoAWQ's (`auto_round:auto_awq`).
    ("autoround_b4_g128", DType::Float16),
    ("autoround_b3_g64", DType::Float16),
    ("autoround_gptq_b4_g32", DType::Float16),
    ("autoround_gptqmodel_b2_g128", DType::Float16),
    ("autoround_awq_b4_g64", DType::Float16),
];

/// Case `name` of `fixtures/intq_added/` with `change` applied to its config.json's
/// `quantization_config`, in a fresh directory.
fn added_with_config(name: &str, change: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let src = dtcast_tests::fixture_path(&format!("intq_added/{name}"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        src.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("config.json")).unwrap()).unwrap();
    change(&mut config["quantization_config"]);
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
    dir
}

#[test]
fn autoround_configs_say_the_layout_and_give_modules_their_own_bits() {
    // `extra_config` gives the module its 4 bits where the config's own say 8.
    let own = added_with_config("autoround_b4_g128", |q| {
        q["bits"] = 8.into();
        q["extra_config"] = serde_json::json!({"model.layers.0.self_attn.o_proj": {"bits": 4}});
    });
    let want = read_sorted(
        &dtcast_tests::fixture_path("intq_added/autoround_b4_g128").join("reference.safetensors"),
    );
    assert!(convert(own.path(), DType::Float16).unwrap() == want);
    // Without it, the config's 8 bits do not fit the tensors.
    let eight = added_with_config("autoround_b4_g128", |q| q["bits"] = 8.into());
    refused(eight.path(), &["o_proj"]);
    let packing = added_with_config("autoround_b4_g128", |q| {
        q["packing_format"] = "auto_round:marlin".into()
    });
    refused(
        packing.path(),
        &["`packing_format`: auto_round:marlin", "auto_round:auto_awq"],
    );
    let float = added_with_config("autoround_b4_g128", |q| q["data_type"] = "nv_fp".into());
    refused(float.path(), &["`data_type`: nv_fp", "integer weights"]);
}

#[test]
fn awq_layouts_other_than_gemm_and_gemv_and_gemv_without_its_group_size_are_refused() {
    let fast = added_with_config("awq_gemv_g128", |q| q["version"] = "gemv_fast".into());
    refused(
        fast.path(),
        &["`version`: gemv_fast;", "GEMM and GEMV layouts"],
    );
    let no_group = added_with_config("awq_gemv_g128", |q| {
        q.as_object_mut().unwrap().remove("group_size");
    });
    refused(
        no_group.path(),
        &["no `group_size`", "AWQ GEMV pads its scales"],
    );
}

#[test]
fn added_cases_of_the_real_tools_dequantize_as_those_tools_do() {
    for (name, dtype) in ADDED {
        let src = dtcast_tests::fixture_path(&format!("intq_added/{name}"));
        let dir = tempfile::tempdir().unwrap();
        for f in ["model.safetensors", "config.json"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        let got = convert(dir.path(), dtype).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = read_sorted(&src.join("reference.safetensors"));
        let bad = differences(&got, &want);
        assert!(bad.is_empty(), "{name}:\n{}", bad.join("\n"));
    }
}

#[test]
fn a_compressed_tensors_group_index_with_groups_not_of_group_size_is_refused() {
    // compressed-tensors gives a column the scale of its place in the columns sorted by
    // `weight_g_idx`, in groups of group_size: only an index of group_size columns a group says
    // which. Column 0 moved from group 0 to group 1 leaves group 0 with 31 of its 32.
    let src = dtcast_tests::fixture_path("intq_added/ct_w4a16_asym_actorder");
    let dir = altered_at(&src, |t| {
        let g = tensor(t, "model.layers.0.self_attn.q_proj.weight_g_idx");
        let zero = g.3.chunks(4).position(|c| c == [0, 0, 0, 0]).unwrap();
        g.3[4 * zero] = 1;
    });
    refused(
        dir.path(),
        &["`weight_g_idx` gives group 0 31 columns", "has its 32"],
    );
}
