//! Scaled formats against their references: every dequantization case of
//! `fixtures/scaled/dequantize.json.gz` (compressed-tensors, torchao, DeepSeek-V3, gpt-oss),
//! bit for bit.

use std::collections::HashMap;

use dtcast::quant::{dequantize, quantize, Quantized, Scheme};
use dtcast::DType;
use dtcast_tests::{fixture, hex, read_sorted};
use serde_json::Value;

/// A fixture tensor: dtype, shape, bytes.
struct Stored {
    dtype: DType,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn stored(t: &Value) -> Stored {
    Stored {
        dtype: t["dtype"].as_str().unwrap().parse().unwrap(),
        shape: t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect(),
        bytes: hex(t["hex"].as_str().unwrap()),
    }
}

/// The elements, logical shape, scales and global scale a case's tensors hold, by the names each
/// reference gives them.
fn parts(scheme: &str, t: &HashMap<String, Stored>) -> (Vec<u8>, Vec<usize>, Vec<u8>, Option<f32>) {
    let pick = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| t.get(*n))
            .unwrap_or_else(|| panic!("{scheme}: none of {names:?}"))
    };
    let elements = pick(&["weight", "weight_packed", "qdata", "blocks"]);
    let scales = pick(&["weight_scale", "scale", "weight_scale_inv", "scales"]);
    let global = ["weight_global_scale", "per_tensor_scale"]
        .iter()
        .find_map(|n| t.get(*n))
        .map(|g| f32::from_le_bytes(g.bytes[..4].try_into().unwrap()));
    let mut shape = elements.shape.clone();
    if scheme == "gpt_oss_mxfp4" {
        // [experts, rows, cols / 32, 16 bytes] -> [experts, rows, cols]
        let blocks = shape.pop().unwrap();
        let groups = shape.pop().unwrap();
        shape.push(groups * blocks * 2);
    } else if elements.dtype == DType::UInt8 {
        // Packed float4: two per byte.
        *shape.last_mut().unwrap() *= 2;
    }
    (elements.bytes.clone(), shape, scales.bytes.clone(), global)
}

#[test]
fn dequantization_matches_every_reference_case() {
    let quantize = fixture("scaled/quantize.json.gz");
    let inputs = quantize["inputs"].as_object().unwrap();
    let cases: HashMap<&str, &Value> = quantize["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c))
        .collect();
    let dequantize_cases = fixture("scaled/dequantize.json.gz");
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in dequantize_cases["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        let scheme_name = case["scheme"].as_str().unwrap();
        let (tensors, weight): (HashMap<String, Stored>, DType) =
            match case["quantize_case"].as_str() {
                Some(q) => {
                    let q = cases[q];
                    let input = &inputs[q["input"].as_str().unwrap()];
                    let tensors = q["outputs"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), stored(v)))
                        .collect();
                    (tensors, input["dtype"].as_str().unwrap().parse().unwrap())
                }
                None => (
                    case["inputs"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), stored(v)))
                        .collect(),
                    DType::Float32,
                ),
            };
        let scheme = Scheme::named(scheme_name, weight).unwrap();
        let (elements, shape, scales, global_scale) = parts(scheme_name, &tensors);
        let q = Quantized {
            elements: &elements,
            shape: &shape,
            scales: &scales,
            global_scale,
        };
        for (name, want) in case["outputs"].as_object().unwrap() {
            let want = stored(want);
            checked += 1;
            match dequantize(&q, &scheme, want.dtype) {
                Err(e) => failures.push(format!("{id} {name}: error {e}")),
                Ok(got) if got == want.bytes => {}
                Ok(got) => {
                    let k = want.dtype.byte_size().unwrap();
                    let diffs: Vec<usize> = (0..want.bytes.len() / k)
                        .filter(|i| got[i * k..(i + 1) * k] != want.bytes[i * k..(i + 1) * k])
                        .collect();
                    let i = diffs[0];
                    failures.push(format!(
                        "{id} {name} ({}): {} of {} elements differ; first {i}: got {:02x?}, want {:02x?}",
                        want.dtype,
                        diffs.len(),
                        want.bytes.len() / k,
                        &got[i * k..(i + 1) * k],
                        &want.bytes[i * k..(i + 1) * k]
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} dequantizations differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 209 * 2, "only {checked} outputs checked");
}

#[test]
fn bad_input_is_an_error_naming_what_is_wrong() {
    let f32s = DType::Float32;
    let mx = Scheme::named("ao_mxfp4_floor", f32s).unwrap();
    let nv = Scheme::named("ct_nvfp4", f32s).unwrap();
    let run = |elements: &[u8], shape: &[usize], scales: &[u8], global, scheme, out| {
        let q = Quantized {
            elements,
            shape,
            scales,
            global_scale: global,
        };
        dequantize(&q, scheme, out).unwrap_err().to_string()
    };
    // Columns that are not a multiple of the group (compressed-tensors and torchao refuse them).
    let e = run(&[0; 10], &[1, 20], &[0], None, &mx, f32s);
    assert_eq!(e, "columns 20 are not a multiple of the group size 32");
    // Buffers that do not match the shape.
    let e = run(&[0; 15], &[1, 32], &[0], None, &mx, f32s);
    assert_eq!(
        e,
        "the elements hold 15 bytes; the shape and scheme need 16"
    );
    let e = run(&[0; 16], &[1, 32], &[0, 0], None, &mx, f32s);
    assert_eq!(e, "the scales hold 2 bytes; the shape and scheme need 1");
    // A quantized weight read without its global scale is refused, not misread.
    let e = run(&[0; 16], &[1, 32], &[0x38, 0x38], None, &nv, f32s);
    assert!(e.contains("needs the tensor's global scale"), "{e}");
    let e = run(&[0; 16], &[1, 32], &[0], Some(1.0), &mx, f32s);
    assert!(e.contains("no global scale"), "{e}");
    // Output dtypes other than the float ones.
    let e = run(&[0; 16], &[1, 32], &[0], None, &mx, DType::Int8);
    assert!(e.contains("float32, bfloat16 or float16, not int8"), "{e}");
    // A scheme whose dtypes do not fit together.
    let odd = Scheme {
        scale: DType::Int4,
        ..mx
    };
    let e = run(&[0; 16], &[1, 32], &[0], None, &odd, f32s);
    assert!(e.contains("scales of int4"), "{e}");
    let e5m2 = Scheme {
        element: DType::Float8E5M2,
        ..mx
    };
    let e = run(&[0; 32], &[1, 32], &[0], None, &e5m2, f32s);
    assert!(e.contains("elements of float8_e5m2"), "{e}");
    assert!(Scheme::named("mxfp3", f32s)
        .unwrap_err()
        .to_string()
        .contains("known: ct_fp8_tensor"));
}

#[test]
fn shapes_no_buffer_backs_are_errors_never_aborts_or_endless_loops() {
    let bf16 = DType::BFloat16;
    let tensor = Scheme::named("ct_fp8_tensor", bf16).unwrap();
    let channel = Scheme::named("ct_fp8_channel", bf16).unwrap();
    let mx = Scheme::named("ct_mxfp4", bf16).unwrap();
    // Dequantizing: the shape is checked against the elements before the output (4 TiB of
    // float32 here) is allocated.
    let q = Quantized {
        elements: &[0; 4],
        shape: &[1 << 40, 1],
        scales: &[0x00, 0x3F],
        global_scale: None,
    };
    let e = dequantize(&q, &tensor, DType::Float32)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "the elements hold 4 bytes; the shape and scheme need 1099511627776"
    );
    // Quantizing rows of no columns: each channel's scale is an all-zero channel's,
    // compressed-tensors' bfloat16 eps 2^-7 (0x3C00) where amax / 448 is 0.
    let q = quantize(&[], bf16, &[1000, 0], &channel).unwrap();
    assert!(q.elements.is_empty());
    assert_eq!(q.scales, [0x00, 0x3C].repeat(1000));
    // 2^62 such rows: 2^63 bytes of bfloat16 scales, which cannot be allocated.
    let e = quantize(&[], bf16, &[1 << 62, 0], &channel)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "the scales of this shape take 9223372036854775808 bytes, more than can be allocated here"
    );
    // 2^63 rows of float32 scales: the byte count itself overflows, quantizing or dequantizing
    // (2^62 rows of no columns, here; the fuzzer's find).
    let f32_channel = Scheme::named("ct_fp8_channel", DType::Float32).unwrap();
    let q = Quantized {
        elements: &[],
        shape: &[1 << 62, 0],
        scales: &[],
        global_scale: None,
    };
    let e = dequantize(&q, &f32_channel, DType::Float32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more bytes than memory can hold"), "{e}");
    let e = quantize(&[], DType::Float32, &[1 << 63, 0], &f32_channel)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more bytes than memory can hold"), "{e}");
    // Groups of no columns: no scales, and no pass over 2^60 empty rows.
    let q = quantize(&[], bf16, &[1 << 60, 0], &mx).unwrap();
    assert!(q.elements.is_empty() && q.scales.is_empty());
    // Counting the scales of any shape answers (2^75 groups of 32 here), never overflows.
    let e = mx.scale_count(1 << 40, 1 << 40).unwrap_err().to_string();
    assert!(e.contains("more scales than memory can hold"), "{e}");
}

#[test]
fn weights_of_no_columns_convert_both_ways_without_a_pass_per_row() {
    // A safetensors file may declare 2^60 rows of no columns over no bytes. Quantizing it and
    // dequantizing the result finish at once (they once looped over empty bands of rows, and
    // allocated a chunk list or scales per row until the allocation aborted); where the scales
    // themselves cannot be stored, the error says so and nothing is written.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let name = "model.layers.0.mlp.down_proj.weight";
    let header = |rows: u64| {
        format!(r#"{{"{name}":{{"dtype":"BF16","shape":[{rows},0],"data_offsets":[0,0]}}}}"#)
    };
    let convert =
        |from: &std::path::Path, to: &std::path::Path, flags: &[&str]| convert_cli(from, to, flags);
    let input = dtcast_tests::file_with(d, "in.safetensors", &header(1 << 60), &[]);
    let quantized = d.join("mxfp4.safetensors");
    let r = convert(&input, &quantized, &["--quantize", "mxfp4"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (packed, scale) = (format!("{name}_packed"), format!("{name}_scale"));
    assert_eq!(
        layout(&read_sorted(&quantized)),
        [
            (packed, DType::UInt8, vec![1 << 60, 0]),
            (scale, DType::UInt8, vec![1 << 60, 0]),
        ]
    );
    let dense = d.join("dense.safetensors");
    let r = convert(&quantized, &dense, &["--dtype", "bfloat16"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let dense_name = name.to_owned();
    assert_eq!(
        layout(&read_sorted(&dense)),
        [(dense_name, DType::BFloat16, vec![1 << 60, 0])]
    );
    // 2^62 rows have 2^62 channel scales: more bytes than memory can address.
    let input = dtcast_tests::file_with(d, "in62.safetensors", &header(1 << 62), &[]);
    let out = d.join("channel.safetensors");
    let r = convert(&input, &out, &["--quantize", "fp8-channel"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("have more bytes than memory can address"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}

#[test]
fn quantizing_refuses_scales_it_would_store_wrongly_and_bands_that_split_a_block() {
    use dtcast::quant::{quantize_rows, TensorAmax};
    let bf16_input = vec![0u8; 2 * 256 * 128];
    // compressed-tensors keeps FP8 scales in the weight's dtype: a scheme named for float32 would
    // be read back as float32 scales, so quantizing a bfloat16 weight with it is refused.
    let f32_scheme = Scheme::named("ct_fp8_block", DType::Float32).unwrap();
    let e = quantize(&bf16_input, DType::BFloat16, &[256, 128], &f32_scheme).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains("stores float32 scales") && e.contains("bfloat16 weight"),
        "{e}"
    );
    // A band of rows must hold whole 128-row blocks (or end the tensor).
    let block = Scheme::named("ct_fp8_block", DType::BFloat16).unwrap();
    let (mut elements, mut scales) = (vec![0u8; 64 * 128], vec![0u8; 2]);
    let mut band = |src: &[u8], rows: std::ops::Range<usize>| {
        let amax = TensorAmax::default();
        let (e, s) = (&mut elements, &mut scales);
        let shape = [256, 128];
        quantize_rows(src, DType::BFloat16, &shape, rows, &block, amax, e, s)
            .unwrap_err()
            .to_string()
    };
    let e = band(&bf16_input[..2 * 64 * 128], 0..64);
    assert!(
        e.contains("starts at a multiple of 128 and ends at one"),
        "{e}"
    );
    // Input that is not the rows it says.
    let e = band(&bf16_input[..100], 0..128);
    assert_eq!(
        e,
        "the input holds 100 bytes; the shape and scheme need 32768"
    );
}

#[test]
fn float16_weights_quantize_and_dequantize_as_compressed_tensors_does() {
    // compressed-tensors quantizes float16 weights in float16 arithmetic (scales rounded to
    // float16, `x / scale` in float16, NVFP4's `2688 / amax` in float16: 1 where it overflows).
    // Every case of quantize_float16.json.gz: the compressor's bytes (or its refusal), and its
    // `decompress` of them (float16 for FP8, bfloat16 for MX and NVFP4) as dtcast's dequantization
    // into that dtype.
    let mut failures = Vec::new();
    let (accepted, refused) = check_quantize_cases(
        "scaled/quantize_float16.json.gz",
        &mut failures,
        |id, scheme, tensors, failures| {
            assert_eq!(
                scheme.scale.byte_size() == Some(2),
                id.starts_with("ct_fp8_")
            );
            let (elements, shape, scales, global_scale) =
                parts(&id[..id.find('/').unwrap()], tensors);
            let q = Quantized {
                elements: &elements,
                shape: &shape,
                scales: &scales,
                global_scale,
            };
            let dense = &tensors["decompressed"];
            match dequantize(&q, scheme, dense.dtype) {
                Ok(back) if back == dense.bytes => {}
                Ok(back) => {
                    let n = back
                        .iter()
                        .zip(&dense.bytes)
                        .filter(|(a, b)| a != b)
                        .count();
                    failures.push(format!(
                        "{id}: dequantized into {}, {n} bytes differ",
                        dense.dtype
                    ));
                }
                Err(e) => failures.push(format!("{id}: dequantizing: {e}")),
            }
        },
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!((accepted, refused), (63, 3));
}

#[test]
fn float16_weights_are_refused_where_their_reference_refuses_them() {
    // torchao's `to_mx` and NVFP4 refuse float16 (as does dtcast for the DeepSeek-V3 and gpt-oss
    // rules, whose references quantized bfloat16 and float32); compressed-tensors' rules take it.
    use dtcast::quant::{Quantizer, TensorAmax};
    let name = "model.layers.0.mlp.down_proj.weight";
    let (rows, cols) = (2usize, 32usize);
    let halves: Vec<u8> = (0..rows * cols)
        .flat_map(|k| ((0x3C00 + 37 * k as u16) | ((k as u16 & 1) << 15)).to_le_bytes())
        .collect();
    for (scheme, reason) in [
        ("ao_mxfp4_floor", "its `to_mx` and NVFP4 refuse float16"),
        ("ao_nvfp4_two_level", "its `to_mx` and NVFP4 refuse float16"),
        ("deepseek_v3_fp8_block", "DeepSeek-V3 and gpt-oss rules"),
        ("gpt_oss_mxfp4", "DeepSeek-V3 and gpt-oss rules"),
    ] {
        let s = Scheme::named(scheme, DType::Float16).unwrap();
        let e = quantize(&halves, DType::Float16, &[rows, cols], &s).unwrap_err();
        let message = e.to_string();
        assert!(
            message.starts_with("float16 weights are not quantized here"),
            "{message}"
        );
        assert!(message.contains(reason), "{scheme}: {message}");
        assert!(TensorAmax::default()
            .update(&halves, DType::Float16, &s)
            .is_err());
        // The device kernels' checks are the same.
        let e = Quantizer::new(DType::Float16, &[rows, cols], &s).unwrap_err();
        assert_eq!(e.to_string(), message);
    }
    let nvfp4 = Scheme::named("ct_nvfp4", DType::Float16).unwrap();
    assert!(quantize(&halves, DType::Float16, &[rows, cols], &nvfp4).is_ok());
    assert!(Quantizer::new(DType::Float16, &[rows, cols], &nvfp4).is_ok());
    let e = quantize(&[0; 8 * 64], DType::Float64, &[rows, cols], &nvfp4).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("float64 weights are not quantized here"),
        "{e}"
    );

    // The CLI: torchao's rules (`--scale-rounding`) refuse the weight, naming it and the ways
    // out, and write nothing.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let header = format!(
        r#"{{"{name}":{{"dtype":"F16","shape":[{rows},{cols}],"data_offsets":[0,{}]}}}}"#,
        halves.len()
    );
    let input = dtcast_tests::file_with(d, "f16.safetensors", &header, &halves);
    let refused = d.join("refused.safetensors");
    let r = convert_cli(
        &input,
        &refused,
        &["--quantize", "mxfp4", "--scale-rounding", "floor"],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    for part in [name, "refuse float16", "--dtype float32", "--ignore"] {
        assert!(r.stderr.contains(part), "{part}: {}", r.stderr);
    }
    assert!(!refused.exists());
}

#[test]
fn a_float16_checkpoint_quantizes_and_dequantizes_as_compressed_tensors_does() {
    // The CLI on a float16 checkpoint: the fixture's input written as a weight, quantized by
    // each compressed-tensors scheme, must hold the compressor's tensors (FP8 scales in
    // float16); dequantized into the dtype compressed-tensors' `decompress` returns, its bytes.
    let cases = fixture("scaled/quantize_float16.json.gz");
    let inputs = cases["inputs"].as_object().unwrap();
    let name = "model.layers.0.mlp.down_proj";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (scheme, flag) in [
        ("ct_fp8_tensor", "fp8-tensor"),
        ("ct_fp8_channel", "fp8-channel"),
        ("ct_fp8_block", "fp8-block"),
        ("ct_mxfp8", "mxfp8"),
        ("ct_mxfp4", "mxfp4"),
        ("ct_nvfp4", "nvfp4"),
    ] {
        let id = format!("{scheme}/weight_sq_float16");
        let case = (cases["cases"].as_array().unwrap().iter())
            .find(|c| c["id"] == id.as_str())
            .unwrap();
        let input = stored(&inputs[case["input"].as_str().unwrap()]);
        let header = format!(
            r#"{{"{name}.weight":{{"dtype":"F16","shape":{:?},"data_offsets":[0,{}]}}}}"#,
            input.shape,
            input.bytes.len()
        );
        let file =
            dtcast_tests::file_with(d, &format!("{flag}.in.safetensors"), &header, &input.bytes);
        let quantized = d.join(format!("{flag}.safetensors"));
        let r = convert_cli(&file, &quantized, &["--quantize", flag]);
        assert_eq!(r.code, 0, "{id}: {}", r.stderr);
        let mut want: Vec<(String, DType, Vec<usize>, Vec<u8>)> =
            (case["outputs"].as_object().unwrap().iter())
                .filter(|(k, _)| k.as_str() != "decompressed")
                .map(|(k, v)| {
                    let t = stored(v);
                    (format!("{name}.{k}"), t.dtype, t.shape, t.bytes)
                })
                .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        let got = read_sorted(&quantized);
        // compressed-tensors' uint8 E8M0 scales, its FP8 scales in the weight's dtype.
        assert_eq!(layout(&got), layout(&want), "{id}");
        assert!(got == want, "{id}: bytes differ");

        let dense = stored(&case["outputs"]["decompressed"]);
        let back = d.join(format!("{flag}.dense.safetensors"));
        let r = convert_cli(&quantized, &back, &["--dtype", &dense.dtype.to_string()]);
        assert_eq!(r.code, 0, "{id}: {}", r.stderr);
        let got = read_sorted(&back);
        assert_eq!(got.len(), 1, "{id}");
        assert_eq!((got[0].1, &got[0].2), (dense.dtype, &dense.shape), "{id}");
        assert!(got[0].3 == dense.bytes, "{id}: dequantized bytes differ");
    }
}

#[test]
fn dequantization_follows_the_stated_arithmetic_on_hand_made_values() {
    // Independent of the fixtures: float4 codes 1..7 are 0.5, 1, 1.5, 2, 3, 4, 6; E8M0 byte 128 is
    // 2 and 255 is 2^128 for gpt-oss (inf after rounding to float32) but NaN for torchao.
    let elements: Vec<u8> = (0..16)
        .map(|i| (i % 8) as u8 | (((i + 1) % 8) as u8) << 4)
        .collect();
    let f32s = |b: Vec<u8>| -> Vec<f32> {
        b.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    let values = [0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let q = |scale: &'static [u8]| Quantized {
        elements: &[],
        shape: &[1, 32],
        scales: scale,
        global_scale: None,
    };
    let ao = Scheme::named("ao_mxfp4_rceil", DType::Float32).unwrap();
    let got = f32s(
        dequantize(
            &Quantized {
                elements: &elements,
                ..q(&[128])
            },
            &ao,
            DType::Float32,
        )
        .unwrap(),
    );
    for (i, g) in got.iter().enumerate() {
        let code = if i % 2 == 0 {
            (i / 2) % 8
        } else {
            (i / 2 + 1) % 8
        };
        assert_eq!(*g, 2.0 * values[code], "element {i}");
    }
    let nan = f32s(
        dequantize(
            &Quantized {
                elements: &elements,
                ..q(&[255])
            },
            &ao,
            DType::Float32,
        )
        .unwrap(),
    );
    assert!(nan.iter().all(|x| x.is_nan()));
    let gpt = Scheme::named("gpt_oss_mxfp4", DType::Float32).unwrap();
    let big = f32s(
        dequantize(
            &Quantized {
                elements: &elements,
                ..q(&[255])
            },
            &gpt,
            DType::Float32,
        )
        .unwrap(),
    );
    assert_eq!(big[0], 0.0); // zero stays zero: a true ldexp
    assert_eq!(big[1], 2f32.powi(127)); // 0.5 * 2^128 fits in float32
    assert_eq!(big[3], f32::INFINITY); // 1.0 * 2^128 does not

    // compressed-tensors' FP8 of a float16 model: the product in float16 arithmetic, which reads
    // a float16 NaN scale with its bits (0x7C05 quieted: 0x7E05, as torch 2.15 writes for
    // `x.to(float16) * scale`), not as `.to(float32)` reads it (0x7FFFFFFF).
    let fp8 = Scheme::named("ct_fp8_channel", DType::Float16).unwrap();
    let halves = |b: Vec<u8>| -> Vec<u16> {
        b.chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect()
    };
    let scales = [0x4000u16, 0x7C05].map(u16::to_le_bytes).concat(); // 2.0, a NaN
    let got = dequantize(
        &Quantized {
            elements: &[0x38, 0x40, 0x38, 0x40], // 1.0, 2.0 in each row
            shape: &[2, 2],
            scales: &scales,
            global_scale: None,
        },
        &fp8,
        DType::Float16,
    )
    .unwrap();
    assert_eq!(halves(got), [0x4000, 0x4400, 0x7E05, 0x7E05]); // 2.0, 4.0, NaN, NaN
}

/// Every case of a quantize fixture: dtcast's `quantize` of the case's input (the scheme named
/// for the input's dtype) against the reference's bytes (elements, scales, global scale), or —
/// where the reference refused the input — an error. Each difference is a line `id: what` in
/// `failures`; `more` checks what else an accepted case holds. Returns the counts of accepted
/// and refused cases.
fn check_quantize_cases(
    file: &str,
    failures: &mut Vec<String>,
    mut more: impl FnMut(&str, &Scheme, &HashMap<String, Stored>, &mut Vec<String>),
) -> (usize, usize) {
    let cases = fixture(file);
    let inputs = cases["inputs"].as_object().unwrap();
    let (mut accepted, mut refused) = (0, 0);
    for case in cases["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap();
        let scheme_name = case["scheme"].as_str().unwrap();
        let input = stored(&inputs[case["input"].as_str().unwrap()]);
        let scheme = Scheme::named(scheme_name, input.dtype).unwrap();
        let got = quantize(&input.bytes, input.dtype, &input.shape, &scheme);
        if case["ok"] == false {
            refused += 1;
            if got.is_ok() {
                failures.push(format!(
                    "{id}: accepted; the reference raised {}",
                    case["error"]
                ));
            }
            continue;
        }
        accepted += 1;
        let got = match got {
            Ok(q) => q,
            Err(e) => {
                failures.push(format!("{id}: error {e}"));
                continue;
            }
        };
        let tensors: HashMap<String, Stored> = (case["outputs"].as_object().unwrap().iter())
            .map(|(k, v)| (k.clone(), stored(v)))
            .collect();
        let (elements, _, scales, global) = parts(scheme_name, &tensors);
        let first_diff = |a: &[u8], b: &[u8]| {
            (a.len() != b.len())
                .then_some(usize::MAX)
                .or_else(|| a.iter().zip(b).position(|(x, y)| x != y))
        };
        if let Some(i) = first_diff(&got.elements, &elements) {
            let n = (got.elements.iter().zip(&elements))
                .filter(|(x, y)| x != y)
                .count();
            failures.push(format!(
                "{id}: {n} element bytes differ, first {i}: got {:02x?}, want {:02x?}",
                got.elements.get(i),
                elements.get(i)
            ));
        }
        if let Some(i) = first_diff(&got.scales, &scales) {
            failures.push(format!(
                "{id}: scale bytes differ at {i}: got {:02x?}, want {:02x?}",
                got.scales.get(i),
                scales.get(i)
            ));
        }
        if got.global_scale.map(f32::to_bits) != global.map(f32::to_bits) {
            failures.push(format!(
                "{id}: global scale {:?} differs from {global:?}",
                got.global_scale
            ));
        }
        more(id, &scheme, &tensors, failures);
    }
    (accepted, refused)
}

#[test]
fn quantization_matches_every_reference_case() {
    // Every case of quantize.json.gz: the reference's bytes (elements, scales, global scale), or —
    // where the reference refused the input — an error.
    let mut failures = Vec::new();
    let (accepted, refused) =
        check_quantize_cases("scaled/quantize.json.gz", &mut failures, |_, _, _, _| {});
    // Inputs holding inf and NaN: which NaN torch writes (payload, sign) depends on which ATen
    // kernel ran vectorised (its max ORs in an all-ones mask, bfloat16 arithmetic rounds NaN to
    // 0x7FC0, a multiply returns one operand's NaN or the other's) — and an E8M0 byte or float4
    // code computed from a NaN follows those bits. These cases differ there, and only in bytes
    // that come from a NaN; dtcast writes NaN by its documented rules. The list is exact: a case
    // that starts or stops differing fails the test.
    const NAN_BITS_DIFFER: &[&str] = &[
        "ct_nvfp4/nonfinite_float32",
        "ao_nvfp4_two_level/nonfinite_float32",
        "ct_mxfp4/nonfinite_bfloat16",
        "ct_nvfp4/nonfinite_bfloat16",
        "ao_mxfp8_rceil/nonfinite_bfloat16",
        "ao_mxfp4_rceil/nonfinite_bfloat16",
        "ao_nvfp4_two_level/nonfinite_bfloat16",
        "ao_nvfp4_single_level/nonfinite_bfloat16",
    ];
    let mut differing: Vec<&str> = failures
        .iter()
        .map(|f| f.split(':').next().unwrap())
        .collect();
    differing.dedup();
    let unexpected: Vec<&String> = failures
        .iter()
        .filter(|f| !NAN_BITS_DIFFER.contains(&f.split(':').next().unwrap()))
        .collect();
    assert!(
        unexpected.is_empty() && differing == NAN_BITS_DIFFER,
        "{} of {} cases differ:\n{}",
        differing.len(),
        accepted + refused,
        failures.join("\n")
    );
    assert_eq!((accepted, refused), (202, 52));
}

/// `dtcast convert INPUT -o OUTPUT FLAGS...` through the CLI.
fn convert_cli(
    input: impl AsRef<std::path::Path>,
    output: impl AsRef<std::path::Path>,
    flags: &[&str],
) -> dtcast_tests::CliOutput {
    let (input, output) = (input.as_ref(), output.as_ref());
    let (input, output) = (input.to_str().unwrap(), output.to_str().unwrap());
    let mut args = vec!["convert", input, "-o", output];
    args.extend_from_slice(flags);
    dtcast_tests::dtcast_cli(&args, "")
}

/// A JSON file, parsed.
fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn converting_each_quantized_checkpoint_dequantizes_it_as_its_reference() {
    // `convert --dtype bfloat16` on each of the seven layouts (config.json beside the file): the
    // output is the reference's dense model, tensor for tensor and byte for byte — quantized
    // weights under their dense names, their scales gone, the other tensors unchanged.
    use dtcast::layer::checkpoint::{convert_file, ConvertOptions};
    let layouts = [
        "ct_fp8_block",
        "ct_fp8_channel",
        "ct_mxfp8",
        "ct_mxfp4",
        "ct_nvfp4",
        "deepseek_fp8_block",
        "gptoss_mxfp4",
    ];
    let mut dequantized = 0;
    for layout in layouts {
        let dir = tempfile::tempdir().unwrap();
        let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{layout}"));
        for f in ["config.json", "model.safetensors"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        let out = dir.path().join("out.safetensors");
        let summary = convert_file(
            &dir.path().join("model.safetensors"),
            &out,
            &ConvertOptions::new(DType::BFloat16),
            &|_, _| {},
        )
        .unwrap_or_else(|e| panic!("{layout}: {e}"));
        assert!(summary.dequantized > 0, "{layout}: nothing dequantized");
        dequantized += summary.dequantized;
        let got = read_sorted(&out);
        let want = read_sorted(&src.join("reference_bf16.safetensors"));
        let names = |v: &[(String, DType, Vec<usize>, Vec<u8>)]| {
            v.iter().map(|t| t.0.clone()).collect::<Vec<_>>()
        };
        assert_eq!(names(&got), names(&want), "{layout}: tensor names");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                (g.1, &g.2),
                (w.1, &w.2),
                "{layout}: {} dtype and shape",
                g.0
            );
            let differ =
                g.3.chunks(2)
                    .zip(w.3.chunks(2))
                    .filter(|(a, b)| a != b)
                    .count();
            assert_eq!(differ, 0, "{layout}: {} differs in {differ} elements", g.0);
        }
    }
    assert!(dequantized >= 7 * 2, "{dequantized} weights dequantized");
}

#[test]
fn a_quantized_weight_is_never_read_without_its_scales() {
    // Converting to a dtype that is not a dequantization target, a config that contradicts the
    // tensors, and a scale whose weight is missing are errors, and nothing is written.
    use dtcast::layer::checkpoint::{convert_file, ConvertOptions};
    let dir = tempfile::tempdir().unwrap();
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block");
    std::fs::copy(
        src.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .unwrap();
    let input = dir.path().join("model.safetensors");
    let out = dir.path().join("out.safetensors");
    let run = |dtype| convert_file(&input, &out, &ConvertOptions::new(dtype), &|_, _| {});
    let e = run(DType::Float8E4M3Fn).unwrap_err().to_string();
    assert!(e.contains("would read it without its scales"), "{e}");
    assert!(e.contains("--dtype bfloat16"), "{e}");
    assert!(!out.exists());
    // A config naming another family.
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"quantization_config": {"quant_method": "mxfp4"}}"#,
    )
    .unwrap();
    let e = run(DType::BFloat16).unwrap_err().to_string();
    assert!(e.contains("inconsistent"), "{e}");
    assert!(!out.exists());
    // A config saying the checkpoint is quantized, beside a file with no quantized weight.
    let dense =
        dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block/reference_bf16.safetensors");
    std::fs::copy(dense, &input).unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"quantization_config": {"quant_method": "compressed-tensors"}}"#,
    )
    .unwrap();
    let e = run(DType::BFloat16).unwrap_err().to_string();
    assert!(e.contains("no quantized weight"), "{e}");
    assert!(!out.exists());
}

/// `dtcast convert INPUT -o OUT --dtype bf16`.
fn to_bf16_cli(input: &std::path::Path, out: &std::path::Path) -> dtcast_tests::CliOutput {
    convert_cli(input, out, &["--dtype", "bf16"])
}

#[test]
fn inspect_names_each_quantized_weight_and_convert_says_what_it_dequantized() {
    use dtcast_tests::dtcast_cli;
    let path = |layout: &str| {
        dtcast_tests::fixture_path(&format!("scaled/checkpoints/{layout}/model.safetensors"))
    };
    let ds = path("deepseek_fp8_block");
    let o = dtcast_cli(&["inspect", ds.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("quantized: 8 weights (deepseek_v3_fp8_block)"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains(
            "  model.layers.0.mlp.down_proj.weight  deepseek_v3_fp8_block  float8_e4m3fn elements, \
             float32 scales [2, 2] (a scale per 128x128 block)"
        ),
        "{}",
        o.stdout
    );
    // A model directory is inspected as its weights are.
    let nv = path("ct_nvfp4");
    for given in [&*nv, nv.parent().unwrap()] {
        let o = dtcast_cli(&["inspect", given.to_str().unwrap()], "");
        assert!(
            o.stdout.contains(
                "  model.layers.0.mlp.down_proj.weight  ct_nvfp4  float4_e2m1fn elements, \
                 float8_e4m3fn scales [192, 16] (a scale per 16 elements of a row), a global scale"
            ),
            "{}: {}{}",
            given.display(),
            o.stdout,
            o.stderr
        );
    }
    // A plain checkpoint says nothing about quantization.
    let o = dtcast_cli(&["inspect", "../examples/tiny.safetensors"], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains("quantized"), "{}", o.stdout);
    // convert reports the dequantized weights; to float8 it refuses with the reason.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dense.safetensors");
    let o = to_bf16_cli(&ds, &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("dequantized 8 quantized weights"),
        "{}",
        o.stdout
    );
    let o = dtcast_cli(
        &[
            "convert",
            ds.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--dtype",
            "f8e4m3fn",
            "--force",
        ],
        "",
    );
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("without its scales"), "{}", o.stderr);
}

mod laws {
    use dtcast::cast::{cast_to_vec, CastMode};
    use dtcast::quant::{
        dequantize, quantize, quantize_rows, DequantPlan, Granularity, Scheme, TensorAmax,
    };
    use dtcast::DType;
    use proptest::prelude::*;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// Schemes whose quantization of its own dequantized output gives the same bytes: the scale
    /// comes back from the largest element, which the first quantization put on the grid.
    /// Not among them: NVFP4 (its global scale follows the tensor's largest magnitude, which the
    /// elements' rounding moves); compressed-tensors' MXFP4 (its float4 writes -0 for a small
    /// negative value, but +0 for -0 itself: `x * sign(x)`) and MXFP8 (a block maximum of
    /// 1.72 * 2^k becomes the element 448 = 1.75 * 256, which its rule rounds up to the next
    /// power of two); torchao's CEIL and RCEIL (the largest element may round down onto a power
    /// of two — float4 2.197 → 2 — from which the rule picks a smaller scale).
    const IDEMPOTENT: &[&str] = &[
        "ct_fp8_tensor",
        "ct_fp8_channel",
        "ct_fp8_block",
        "ao_mxfp8_floor",
        "ao_mxfp8_even",
        "ao_mxfp4_floor",
        "ao_mxfp4_even",
    ];

    /// x86's product of an element and its factor (the plan's rule): a NaN factor, else a NaN
    /// element, comes back quieted; an invalid product is x86's default NaN.
    fn x86_product(x: f32, f: f32) -> f32 {
        let quiet = |v: f32| f32::from_bits(v.to_bits() | 0x0040_0000);
        if f.is_nan() {
            quiet(f)
        } else if x.is_nan() {
            quiet(x)
        } else if (x * f).is_nan() {
            f32::from_bits(0xFFC0_0000)
        } else {
            x * f
        }
    }

    #[test]
    fn a_16_bit_dequantization_is_the_float32_product_cast() {
        // Every form rounds the float32 product once, as the cast rounds it. For the schemes
        // that compute in float32 (compressed-tensors', DeepSeek's), dequantizing into bfloat16
        // or float16 equals dequantizing into float32 and casting (torch's mode). torchao
        // computes in the output dtype (a float16 factor can underflow where a float32 one does
        // not; a NaN element is that dtype's NaN): there, the product of the plan's value and
        // factor for that output, cast. Elements of every code (NaN codes included: their
        // payloads reach float16), scales from quantizing random weights.
        let (rows, cols) = (512, 256);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let input: Vec<u8> = (0..rows * cols)
            .flat_map(|_| ((next() >> 20) as u16 & 0xBFFF).to_le_bytes())
            .collect();
        let shape = [rows, cols];
        for &name in Scheme::NAMES.iter().filter(|n| **n != "gpt_oss_mxfp4") {
            let s = Scheme::named(name, DType::BFloat16).unwrap();
            if !s.quantizes() {
                continue;
            }
            let mut q = quantize(&input, DType::BFloat16, &shape, &s).unwrap();
            q.elements.iter_mut().for_each(|e| *e = next() as u8);
            let single = dequantize(&q.view(&shape), &s, DType::Float32).unwrap();
            for out in [DType::BFloat16, DType::Float16] {
                let got = dequantize(&q.view(&shape), &s, out).unwrap();
                let products = if name.starts_with("ao_") {
                    // torchao's schemes: groups with one-byte scales, a factor per byte.
                    let plan = DequantPlan::new(&q.view(&shape), &s, out).unwrap();
                    let Granularity::Group(k) = s.granularity else {
                        panic!("{name}: not groups")
                    };
                    assert!(plan.by_scale_byte, "{name}");
                    let code = |i: usize| match s.element.bits() {
                        4 => usize::from(q.elements[i / 2] >> (4 * (i % 2)) & 0xF),
                        _ => usize::from(q.elements[i]),
                    };
                    (0..rows * cols)
                        .map(|i| {
                            let f = plan.factors[usize::from(q.scales[i / k])];
                            x86_product(plan.values[code(i)], f)
                        })
                        .flat_map(f32::to_le_bytes)
                        .collect()
                } else {
                    single.clone()
                };
                let mut want = vec![0u8; got.len()];
                dtcast::cast::cast(
                    &products,
                    DType::Float32,
                    &mut want,
                    out,
                    dtcast::cast::CastMode::Torch,
                )
                .unwrap();
                let first = got.chunks(2).zip(want.chunks(2)).position(|(a, b)| a != b);
                assert!(
                    first.is_none(),
                    "{name} into {out}: element {first:?}: {:02x?} not {:02x?}",
                    first.map(|i| &got[2 * i..2 * i + 2]),
                    first.map(|i| &want[2 * i..2 * i + 2]),
                );
            }
        }
    }

    #[test]
    fn dequantizing_in_bands_of_rows_gives_the_whole_tensors_bytes() {
        // A tensor of 640 rows of 1024 is dequantized in pieces of rows on the thread pool
        // (several pieces, the last one short); bands of 128 rows dequantized apart, each with
        // its own scales, are each inside one piece. The law: the whole tensor's bytes are the
        // bands' bytes, for every scheme and output dtype — whichever form (one pass, or the
        // float32 buffer) serves it.
        let (rows, cols, band) = (640, 1024, 128);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let input: Vec<u8> = (0..rows * cols)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Normal bfloat16 magnitudes from 2^-20 to 2^12, either sign.
                let exponent = 107 + (state >> 32) % 32;
                let bits = ((state >> 8) & 0x807F) as u16 | (exponent as u16) << 7;
                bits.to_le_bytes()
            })
            .collect();
        let shape = [rows, cols];
        for &name in Scheme::NAMES.iter().filter(|n| **n != "gpt_oss_mxfp4") {
            let s = Scheme::named(name, DType::BFloat16).unwrap();
            if !s.quantizes() {
                continue;
            }
            let q = quantize(&input, DType::BFloat16, &shape, &s).unwrap();
            let element_bytes = |r: usize| s.element.storage_bytes(r * cols).unwrap();
            let scale_size = s.scale.byte_size().unwrap();
            for out in [DType::BFloat16, DType::Float16, DType::Float32] {
                let whole = dequantize(&q.view(&shape), &s, out).unwrap();
                let mut bands = Vec::new();
                for first in (0..rows).step_by(band) {
                    let at = s.scale_range(first, first + band, cols);
                    let view = dtcast::quant::Quantized {
                        elements: &q.elements[element_bytes(first)..element_bytes(first + band)],
                        shape: &[band, cols],
                        scales: &q.scales[at.start * scale_size..at.end * scale_size],
                        global_scale: q.global_scale,
                    };
                    bands.extend(dequantize(&view, &s, out).unwrap());
                }
                assert_eq!(whole.len(), bands.len(), "{name} into {out}");
                let first_difference = whole.iter().zip(&bands).position(|(a, b)| a != b);
                assert_eq!(
                    first_difference, None,
                    "{name} into {out}: first differing byte"
                );
            }
        }
    }

    /// The schemes `quantize` writes (every one but ModelOpt's, which dtcast reads only).
    fn written_schemes() -> Vec<&'static str> {
        (Scheme::NAMES.iter().copied())
            .filter(|n| Scheme::named(n, DType::Float32).unwrap().quantizes())
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn quantizing_the_dequantized_tensor_gives_the_same_bytes(
            x in prop::collection::vec(-1.0e4f32..1.0e4, 64),
            scheme in prop::sample::select(IDEMPOTENT),
        ) {
            let shape = [2, 32];
            let s = Scheme::named(scheme, DType::Float32).unwrap();
            let q = quantize(&bytes(&x), DType::Float32, &shape, &s).unwrap();
            let y = dequantize(&q.view(&shape), &s, DType::Float32).unwrap();
            let q2 = quantize(&y, DType::Float32, &shape, &s).unwrap();
            prop_assert_eq!(q2, q);
        }

        #[test]
        fn quantizing_in_bands_of_rows_gives_the_whole_tensors_bytes(
            x in prop::collection::vec(-1.0e4f32..1.0e4, 256 * 64),
            scheme in prop::sample::select(written_schemes()),
            dtype in prop::sample::select(&[DType::Float32, DType::BFloat16, DType::Float16][..]),
            split in 0usize..=256,
        ) {
            // Rows 0..split and split..rows quantized apart (the split at a multiple of the
            // scheme's row alignment; the amax of the whole tensor given to both) are the
            // whole tensor's quantization. bfloat16 and float16 input: compressed-tensors
            // computes in it (float32 where the scheme's reference refuses the dtype).
            let s = Scheme::named(scheme, dtype).unwrap();
            let (dtype, s) = if s.check_input(dtype).is_ok() {
                (dtype, s)
            } else {
                (DType::Float32, Scheme::named(scheme, DType::Float32).unwrap())
            };
            let input = cast_to_vec(&bytes(&x), DType::Float32, dtype, CastMode::Torch).unwrap();
            let rows = if s.row_alignment() > 1 { 256 } else { 16 };
            let shape = [rows, 64];
            let input = &input[..rows * 64 * dtype.byte_size().unwrap()];
            let split = split.min(rows) / s.row_alignment() * s.row_alignment();
            let whole = quantize(input, dtype, &shape, &s).unwrap();
            let mut amax = TensorAmax::default();
            amax.update(input, dtype, &s).unwrap();
            let (mut elements, mut scales) = (vec![0u8; whole.elements.len()], vec![0u8; whole.scales.len()]);
            let element_bytes = |r: usize| s.element.storage_bytes(r * 64).unwrap();
            let scale_bytes = |r: std::ops::Range<usize>| {
                let at = s.scale_range(r.start, r.end, 64);
                at.start * s.scale.byte_size().unwrap()..at.end * s.scale.byte_size().unwrap()
            };
            let row_bytes = 64 * dtype.byte_size().unwrap();
            let mut global = None;
            for band in [0..split, split..rows] {
                global = quantize_rows(
                    &input[band.start * row_bytes..band.end * row_bytes],
                    dtype,
                    &shape,
                    band.clone(),
                    &s,
                    amax,
                    &mut elements[element_bytes(band.start)..element_bytes(band.end)],
                    &mut scales[scale_bytes(band.clone())],
                ).unwrap();
            }
            prop_assert!(elements == whole.elements, "elements differ");
            prop_assert_eq!(scales, whole.scales);
            prop_assert_eq!(global, whole.global_scale);
        }

        #[test]
        fn fp8_dequantized_values_are_within_half_a_step_of_the_input(
            x in prop::collection::vec(-1.0e4f32..1.0e4, 64),
            scheme in prop::sample::select(&["ct_fp8_tensor", "ct_fp8_channel", "ct_fp8_block"][..]),
        ) {
            // |y - x| <= s * max(|x / s| * 2^-4, 2^-10): half a float8_e4m3fn step at x / s
            // (2^-4 relative for normals, 2^-10 absolute among subnormals), scaled back.
            let shape = [2, 32];
            let s = Scheme::named(scheme, DType::Float32).unwrap();
            let q = quantize(&bytes(&x), DType::Float32, &shape, &s).unwrap();
            let scales = floats(&q.scales);
            let y = floats(&dequantize(&q.view(&shape), &s, DType::Float32).unwrap());
            for (i, (&a, &b)) in x.iter().zip(&y).enumerate() {
                let scale = match scheme {
                    "ct_fp8_channel" => scales[i / 32],
                    _ => scales[0],
                };
                let bound = scale * (a.abs() / scale * 2f32.powi(-4)).max(2f32.powi(-10));
                prop_assert!(
                    (f64::from(b) - f64::from(a)).abs() <= f64::from(bound) * (1.0 + 1e-6),
                    "element {}: {} -> {} (scale {})", i, a, b, scale
                );
            }
        }
    }
}

/// The rows of `dtcast bench ARGS --json`, a run that must succeed.
fn bench_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let o = dtcast_tests::dtcast_cli(&[&["bench"], args, &["--json"]].concat(), "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn bench_measures_each_scheme_both_ways_beside_memcpy() {
    let rows = bench_rows(&[
        "--scheme",
        "fp8-block,ao_mxfp4_rceil",
        "--elements",
        "8192",
        "--repeat",
        "1",
        "--threads",
        "1",
    ]);
    assert_eq!(rows.len(), 4);
    for (row, (scheme, direction)) in rows.iter().zip([
        ("fp8-block", "quantize"),
        ("fp8-block", "dequantize"),
        ("ao_mxfp4_rceil", "quantize"),
        ("ao_mxfp4_rceil", "dequantize"),
    ]) {
        assert_eq!(
            (row["scheme"].as_str(), row["direction"].as_str()),
            (Some(scheme), Some(direction))
        );
        assert_eq!(row["dense"].as_str(), Some("bfloat16"), "{row}");
        for k in ["gelem_per_s", "cast_gbps", "memcpy_gbps", "ratio"] {
            assert!(row[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {row}");
        }
        // One round: its ratio is the ratio of the two throughputs. Each of the three is
        // printed to 3 places, so the ratio lies in the interval the rounded throughputs allow.
        let f = |k: &str| row[k].as_f64().unwrap();
        let (cast, copy, ratio) = (f("cast_gbps"), f("memcpy_gbps"), f("ratio"));
        let e = 0.0005;
        let low = (cast - e) / (copy + e) - e;
        let high = if copy > e {
            (cast + e) / (copy - e) + e
        } else {
            f64::INFINITY
        };
        assert!((low..=high).contains(&ratio), "{row}");
        // --threads is honoured (it once was silently ignored here).
        assert_eq!(row["threads"].as_u64(), Some(1), "{row}");
        assert_eq!(
            row["kernels"].as_str(),
            Some(dtcast::cast::isa().name()),
            "{row}"
        );
    }
    // One --backend: the schemes run what a machine whose best kernels those are runs (a
    // process of its own: the choice is the process's, and this one's is made).
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_dtcast-child"))
        .args([
            "bench",
            "--scheme",
            "nvfp4",
            "--elements",
            "8192",
            "--repeat",
            "1",
            "--backend",
            "portable",
            "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.lines().count() == 2
            && stdout
                .lines()
                .all(|l| l.contains("\"kernels\":\"portable\"")),
        "{stdout}"
    );
    // --dequantize-to: the dequantizing row writes (and counts the bytes of) that dtype.
    let row = |to: &str| {
        let rows = bench_rows(&[
            "--scheme",
            "mxfp4",
            "--elements",
            "8192",
            "--repeat",
            "1",
            "--dequantize-to",
            to,
        ]);
        rows[1].clone()
    };
    let (half, single) = (row("float16"), row("float32"));
    assert_eq!(half["dense"].as_str(), Some("float16"), "{half}");
    assert_eq!(single["dense"].as_str(), Some("float32"), "{single}");
    // The same elements: gigabytes per second over elements per second is the bytes per
    // element moved (mxfp4: half a byte of codes and 1/32 of a scale byte, plus the output).
    let bytes_per_element = |r: &serde_json::Value, out: f64| {
        let moved = r["cast_gbps"].as_f64().unwrap() / r["gelem_per_s"].as_f64().unwrap();
        // (Both figures are printed rounded: a tenth either way is plenty, and far from the
        // bfloat16 output's 2.53.)
        let want = out + 0.5 + 1.0 / 32.0;
        assert!(
            (moved - want).abs() < 0.1 * want,
            "{r}: {moved} bytes an element"
        );
    };
    bytes_per_element(&half, 2.0);
    bytes_per_element(&single, 4.0);
    let o = dtcast_tests::dtcast_cli(
        &[
            "bench",
            "--scheme",
            "mxfp4",
            "--elements",
            "8192",
            "--dequantize-to",
            "int8",
        ],
        "",
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains("float32, bfloat16 or float16, not int8"),
        "{}",
        o.stderr
    );
    let o = dtcast_tests::dtcast_cli(&["bench", "--dequantize-to", "float16"], "");
    assert_ne!(o.code, 0, "--dequantize-to without --scheme");
    // --quantize-from: the quantizing row reads (and counts the bytes of) that dtype; a dtype the
    // scheme's reference does not quantize is an error saying so.
    let from = |dtype: &str| {
        bench_rows(&[
            "--scheme",
            "fp8-channel",
            "--elements",
            "8192",
            "--repeat",
            "1",
            "--quantize-from",
            dtype,
        ])[0]
            .clone()
    };
    for (dtype, size) in [("float16", 2.0), ("float32", 4.0)] {
        let r = from(dtype);
        assert_eq!(r["dense"].as_str(), Some(dtype), "{r}");
        // Read: the weight; written: a float8 byte an element and a scale per row of 4096.
        let moved = r["cast_gbps"].as_f64().unwrap() / r["gelem_per_s"].as_f64().unwrap();
        let want = size + 1.0 + size / 4096.0;
        assert!(
            (moved - want).abs() < 0.1 * want,
            "{r}: {moved} bytes an element"
        );
    }
    let o = dtcast_tests::dtcast_cli(
        &[
            "bench",
            "--scheme",
            "ao_mxfp4_floor",
            "--elements",
            "8192",
            "--quantize-from",
            "float16",
        ],
        "",
    );
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("refuse float16"), "{}", o.stderr);
    let o = dtcast_tests::dtcast_cli(&["bench", "--quantize-from", "float16"], "");
    assert_ne!(o.code, 0, "--quantize-from without --scheme");
    let o = dtcast_tests::dtcast_cli(&["bench", "--scheme", "fp3", "--elements", "8192"], "");
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("unknown scheme `fp3`"), "{}", o.stderr);
    // The cast benchmark's flags do not apply to schemes: an error, not a silent no-op.
    for flag in [
        &["--backend", "scalar,portable"][..],
        &["--alloc"],
        &["--mode", "exact"],
    ] {
        let args = [
            &["bench", "--scheme", "mxfp4", "--elements", "8192"][..],
            flag,
        ]
        .concat();
        let o = dtcast_tests::dtcast_cli(&args, "");
        assert_eq!(o.code, 1, "{flag:?}");
        assert!(o.stderr.contains("leave out"), "{flag:?}: {}", o.stderr);
    }
}

#[test]
fn quantize_writes_compressed_tensors_layout_and_its_bytes() {
    // `convert --quantize` on each compressed-tensors reference's dense model: the same tensors
    // (names, dtypes, shapes) as compressed-tensors' own file; for FP8 per channel and per block
    // the same bytes too (quantizing a dequantized FP8 tensor gives back its bytes, as the law
    // above says; for MX and NVFP4 it need not).
    for (layout, scheme, same_bytes) in [
        ("ct_fp8_block", "fp8-block", true),
        ("ct_fp8_channel", "fp8-channel", true),
        ("ct_mxfp8", "mxfp8", false),
        ("ct_mxfp4", "mxfp4", false),
        ("ct_nvfp4", "nvfp4", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{layout}"));
        let dense = dir.path().join("dense.safetensors");
        std::fs::copy(src.join("reference_bf16.safetensors"), &dense).unwrap();
        let out = dir.path().join("q.safetensors");
        let o = convert_cli(&dense, &out, &["--quantize", scheme]);
        assert_eq!(o.code, 0, "{layout}: {}", o.stderr);
        assert!(o.stdout.starts_with("quantized 8 weights"), "{}", o.stdout);
        let (got, want) = (
            read_sorted(&out),
            read_sorted(&src.join("model.safetensors")),
        );
        let layout_of = |v: &[(String, DType, Vec<usize>, Vec<u8>)]| {
            v.iter()
                .map(|t| (t.0.clone(), t.1, t.2.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(layout_of(&got), layout_of(&want), "{layout}");
        if same_bytes {
            for (g, w) in got.iter().zip(&want) {
                assert!(g.3 == w.3, "{layout}: {} differs", g.0);
            }
        }
        // And back: dequantizing our output reads it as its layout.
        let back = dir.path().join("back.safetensors");
        let o = convert_cli(&out, &back, &["--dtype", "bf16"]);
        assert!(
            o.stdout.contains("dequantized 8 quantized weights"),
            "{layout}: {}{}",
            o.stdout,
            o.stderr
        );
    }
    // What cannot be quantized is refused before anything is written.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q.safetensors");
    let q = dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block/model.safetensors");
    let o = convert_cli(&q, &out, &["--quantize", "mxfp4"]);
    assert!(o.stderr.contains("already quantized"), "{}", o.stderr);
    let o = convert_cli("../examples/tiny.safetensors", &out, &["--quantize", "fp3"]);
    assert!(
        o.stderr.contains("the schemes are fp8-tensor"),
        "{}",
        o.stderr
    );
    let o = convert_cli(
        "../examples/tiny.safetensors",
        &out,
        &["--quantize", "nvfp4", "--scale-rounding", "floor"],
    );
    assert!(
        o.stderr.contains("applies to mxfp8 and mxfp4"),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
}

/// `file`'s tensors in two shards in `dir` (layer 0 and the embeddings, then the rest) with a
/// `model.safetensors.index.json` naming them; the index's path.
fn split_in_two_shards(file: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    split_in_two_shards_by(file, dir, |n| {
        n.contains("layers.0.") || n.contains("embed")
    })
}

/// [`split_in_two_shards`] with the tensors for which `first` holds in the first shard.
fn split_in_two_shards_by(
    file: &std::path::Path,
    dir: &std::path::Path,
    first: impl Fn(&str) -> bool,
) -> std::path::PathBuf {
    dtcast_tests::two_shards(file, dir, first)
}

/// Every tensor the index at `out` names is in the shard it names, equal to `want`'s, and the
/// index names nothing else.
fn assert_sharded_equals(out: &std::path::Path, want: &Tensors) {
    let new_index: serde_json::Value = read_json(&out.join("model.safetensors.index.json"));
    let map = new_index["weight_map"].as_object().unwrap();
    for (name, dtype, shape, bytes) in want {
        let shard = map[name].as_str().unwrap();
        let got = read_sorted(&out.join(shard));
        let t = got.iter().find(|t| &t.0 == name).unwrap();
        assert_eq!((&t.1, &t.2), (dtype, shape), "{name}");
        assert!(&t.3 == bytes, "{name} differs");
    }
    assert_eq!(map.len(), want.len());
}

/// DeepSeek-V3's reference checkpoint, its `file` (the quantized model or the dense reference)
/// split in two shards in `dir` beside its config.json; the index's path.
fn deepseek_in_two_shards(file: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let src = dtcast_tests::fixture_path("scaled/checkpoints/deepseek_fp8_block");
    let index = split_in_two_shards(&src.join(file), dir);
    std::fs::copy(src.join("config.json"), dir.join("config.json")).unwrap();
    index
}

#[test]
fn a_sharded_quantized_checkpoint_dequantizes_shard_by_shard_with_a_new_index() {
    // DeepSeek-V3's layout split in two shards (each weight beside its scales), with its
    // config.json: the output shards hold the reference's dense tensors, and the new index names
    // them (no scale tensors) in the shards that hold them.
    use dtcast::layer::checkpoint::{convert_index, ConvertOptions};
    let dir = tempfile::tempdir().unwrap();
    let index = deepseek_in_two_shards("model.safetensors", dir.path());
    let out = dir.path().join("dense");
    let summary = convert_index(
        &index,
        &out,
        &ConvertOptions::new(DType::BFloat16),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!(summary.dequantized, 8);
    let src = dtcast_tests::fixture_path("scaled/checkpoints/deepseek_fp8_block");
    assert_sharded_equals(&out, &read_sorted(&src.join("reference_bf16.safetensors")));
}

#[test]
fn a_weight_whose_scales_another_shard_stores_dequantizes_from_both() {
    // The tools that shard checkpoints cut between any two tensors, so a weight's scales may be
    // in the next shard (pytorch#162214, GPTQModel#2875 met it in DeepSeek-V3-style models):
    // each weight is dequantized from both shards into the shard of its elements, the other
    // shard drops the scales, and the values are the reference's. Inspect names both shards.
    use dtcast::layer::checkpoint::{convert_index, ConvertOptions};
    let src = dtcast_tests::fixture_path("scaled/checkpoints/deepseek_fp8_block");
    let dir = tempfile::tempdir().unwrap();
    // Layer 0's weights in the first shard, their scales in the second (and layer 1's weights
    // in the second, their scales in the first).
    let index = split_in_two_shards_by(&src.join("model.safetensors"), dir.path(), |n| {
        n.contains("layers.0.") != n.ends_with("_scale_inv")
    });
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let o = dtcast_tests::dtcast_cli(&["inspect", index.to_str().unwrap()], "");
    assert!(
        o.stdout.contains(
            "  model.layers.0.mlp.down_proj.weight [model-00001-of-00002.safetensors, scales in \
             model-00002-of-00002.safetensors]  deepseek_v3_fp8_block"
        ),
        "{}{}",
        o.stdout,
        o.stderr
    );
    let out = dir.path().join("dense");
    let options = ConvertOptions::new(DType::BFloat16);
    let summary = convert_index(&index, &out, &options, &|_, _| {}).unwrap();
    assert_eq!(summary.dequantized, 8);
    assert_sharded_equals(&out, &read_sorted(&src.join("reference_bf16.safetensors")));
    let new_index: serde_json::Value = read_json(&out.join("model.safetensors.index.json"));
    assert_eq!(
        new_index["weight_map"]["model.layers.0.mlp.down_proj.weight"],
        "model-00001-of-00002.safetensors"
    );
    // A scale whose weight no shard holds is still refused, naming what is missing.
    let lost = tempfile::tempdir().unwrap();
    let index = split_in_two_shards_by(&src.join("model.safetensors"), lost.path(), |n| {
        n.contains("layers.0.")
    });
    let second = lost.path().join("model-00002-of-00002.safetensors");
    let kept: Vec<(String, dtcast::Tensor)> = dtcast::layer::checkpoint::load_map(&second)
        .unwrap()
        .into_iter()
        .filter(|(n, _)| n != "model.layers.1.mlp.down_proj.weight")
        .collect();
    dtcast::layer::checkpoint::save(&second, &kept, &[]).unwrap();
    let map = std::fs::read_to_string(&index).unwrap().replace(
        r#""model.layers.1.mlp.down_proj.weight":"model-00002-of-00002.safetensors","#,
        "",
    );
    std::fs::write(&index, map).unwrap();
    std::fs::copy(src.join("config.json"), lost.path().join("config.json")).unwrap();
    let e = convert_index(&index, &lost.path().join("dense"), &options, &|_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "`model.layers.1.mlp.down_proj.weight_scale_inv` has no \
             `model.layers.1.mlp.down_proj.weight` beside it"
        ),
        "{e}"
    );
}

#[test]
fn activation_quantization_parameters_go_with_their_dequantized_weights() {
    // An NVFP4 W4A4 checkpoint (llm-compressor quantizes activations too) holds an
    // `input_global_scale` beside a weight; dequantized, the config.json's quantization_config
    // is gone, so the parameter would be a tensor no dense model has: it is dropped, and said.
    use dtcast::layer::checkpoint::{load_map, save};
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_nvfp4");
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    let mut tensors: Vec<(String, dtcast::Tensor)> = load_map(src.join("model.safetensors"))
        .unwrap()
        .into_iter()
        .collect();
    let input = "model.layers.0.mlp.down_proj.input_global_scale";
    tensors.push((
        input.into(),
        dtcast::Tensor::from_vec(vec![1234.5f32], &[1]).unwrap(),
    ));
    save(model.join("model.safetensors"), &tensors, &[]).unwrap();
    let config = std::fs::read_to_string(src.join("config.json")).unwrap();
    let w4a4 = config.replace(
        r#""input_activations": null"#,
        r#""input_activations": {"dynamic": "local", "group_size": 16, "num_bits": 4,
            "strategy": "tensor_group", "symmetric": true, "type": "float"}"#,
    );
    assert_ne!(w4a4, config);
    std::fs::write(model.join("config.json"), w4a4).unwrap();
    let out = dir.path().join("dense");
    let o = to_bf16_cli(&model, &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(
            "dequantized 8 quantized weights (and dropped their 1 activation quantization \
             parameters)"
        ),
        "{}",
        o.stdout
    );
    // The output is the reference's dense checkpoint, nothing more.
    assert_eq!(
        read_sorted(&out.join("model.safetensors")),
        read_sorted(&src.join("reference_bf16.safetensors"))
    );
    assert!(read_json(&out.join("config.json"))
        .get("quantization_config")
        .is_none());
}

#[test]
fn a_kept_quantized_weight_keeps_its_parts_in_the_new_index() {
    // --keep leaves one NVFP4 weight quantized while the rest of the sharded checkpoint is
    // dequantized: the new index names that weight's packed elements and scales (in the shard
    // that holds them), not a dense tensor no shard has.
    use dtcast::layer::checkpoint::{convert_index, load_map, ConvertOptions};
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_nvfp4");
    let dir = tempfile::tempdir().unwrap();
    let index = split_in_two_shards(&src.join("model.safetensors"), dir.path());
    std::fs::copy(src.join("config.json"), dir.path().join("config.json")).unwrap();
    let mut options = ConvertOptions::new(DType::BFloat16);
    options.keep = vec!["model.layers.0.mlp.down_proj.*".to_owned()];
    let out = dir.path().join("dense");
    let summary = convert_index(&index, &out, &options, &|_, _| {}).unwrap();
    assert_eq!(summary.dequantized, 7);
    let new_index: serde_json::Value = read_json(&out.join("model.safetensors.index.json"));
    let map = new_index["weight_map"].as_object().unwrap();
    let down = "model.layers.0.mlp.down_proj";
    for part in ["weight_packed", "weight_scale", "weight_global_scale"] {
        assert_eq!(
            map.get(&format!("{down}.{part}")).and_then(|v| v.as_str()),
            Some("model-00001-of-00002.safetensors"),
            "{part}"
        );
    }
    assert!(!map.contains_key(&format!("{down}.weight")));
    assert!(map.contains_key("model.layers.0.mlp.up_proj.weight"));
    // Every tensor the index names is in the shard it names, and no other.
    let mut named = 0;
    for shard in [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ] {
        for name in load_map(out.join(shard)).unwrap().keys() {
            assert_eq!(map[name], shard, "{name}");
            named += 1;
        }
    }
    assert_eq!(named, map.len());
}

#[test]
fn inspect_names_the_quantized_weights_of_a_sharded_checkpoint_with_their_shards() {
    // Real quantized models are sharded: the index is inspected as the file is, each weight
    // named with the shard that holds it; a config.json that says quantized when no shard holds
    // a quantized weight is reported, not ignored.
    let inspect = |file: &str| {
        let dir = tempfile::tempdir().unwrap();
        let index = deepseek_in_two_shards(file, dir.path());
        let o = dtcast_tests::dtcast_cli(&["inspect", index.to_str().unwrap()], "");
        assert_eq!(o.code, 0, "{}", o.stderr);
        o.stdout
    };
    let says = |stdout: &str, lines: &[&str]| {
        for line in lines {
            assert!(stdout.contains(line), "no `{line}` in:\n{stdout}");
        }
    };
    says(
        &inspect("model.safetensors"),
        &[
            "quantized: 8 weights (deepseek_v3_fp8_block)",
            "  model.layers.0.mlp.down_proj.weight [model-00001-of-00002.safetensors]  \
             deepseek_v3_fp8_block  float8_e4m3fn elements, float32 scales [2, 2] (a scale per \
             128x128 block)",
            ".weight [model-00002-of-00002.safetensors]  deepseek_v3_fp8_block",
        ],
    );
    // The same config.json beside the dense reference in two shards.
    says(
        &inspect("reference_bf16.safetensors"),
        &[
            "quantized: cannot be read: ",
            "config.json's quantization_config says `fp8`, but no shard holds a quantized weight \
             with its scales",
        ],
    );
}

#[test]
fn dense_tensors_whose_names_look_like_scales_convert_as_they_are() {
    // A floating `*_scales` parameter and a dense weight stored beside its scale (compressed-
    // tensors' "frozen" state) are not quantized weights: a plain conversion casts them.
    use dtcast::layer::checkpoint::{convert_file, save, ConvertOptions};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("m.safetensors");
    let t = |v: Vec<f32>, shape: &[usize]| dtcast::Tensor::from_vec(v, shape).unwrap();
    save(
        &input,
        &[
            ("model.rope_scales".to_owned(), t(vec![1.0, 2.0], &[2])),
            ("x.weight".to_owned(), t(vec![0.5; 4], &[2, 2])),
            ("x.weight_scale".to_owned(), t(vec![0.25], &[1])),
        ],
        &[],
    )
    .unwrap();
    let out = dir.path().join("o.safetensors");
    let s = convert_file(
        &input,
        &out,
        &ConvertOptions::new(DType::BFloat16),
        &|_, _| {},
    )
    .unwrap();
    assert_eq!((s.converted, s.dequantized), (3, 0));
}

#[test]
fn a_model_directory_converts_with_its_files_and_its_config() {
    // Both directions on a model directory: the weights as the file forms convert them, the
    // other files copied, config.json updated — quantization_config removed (dequantize) or
    // written as compressed-tensors writes it (quantize).
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block");
    let fixture_config: serde_json::Value = read_json(&src.join("config.json"));
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::copy(
        src.join("model.safetensors"),
        model.join("model.safetensors"),
    )
    .unwrap();
    std::fs::copy(src.join("config.json"), model.join("config.json")).unwrap();
    std::fs::write(model.join("tokenizer.json"), "{\"kept\": true}").unwrap();
    let dense = dir.path().join("dense");
    let o = convert_cli(&model, &dense, &["--dtype", "bf16"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        read_sorted(&dense.join("model.safetensors")),
        read_sorted(&src.join("reference_bf16.safetensors"))
    );
    assert_eq!(
        std::fs::read_to_string(dense.join("tokenizer.json")).unwrap(),
        "{\"kept\": true}"
    );
    let config: serde_json::Value = read_json(&dense.join("config.json"));
    let mut expected = fixture_config.clone();
    expected
        .as_object_mut()
        .unwrap()
        .remove("quantization_config");
    assert_eq!(config, expected);
    // And back: the dense directory quantized gives compressed-tensors' files and config.
    let again = dir.path().join("fp8");
    let o = convert_cli(&dense, &again, &["--quantize", "fp8-block"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        read_sorted(&again.join("model.safetensors")),
        read_sorted(&src.join("model.safetensors"))
    );
    let config: serde_json::Value = read_json(&again.join("config.json"));
    assert_eq!(config, fixture_config);
    // The output directory is not replaced without --force, and --force replaces only a
    // directory that holds what a conversion of this model writes.
    let o = convert_cli(&dense, &again, &["--quantize", "fp8-block"]);
    assert!(o.stderr.contains("pass --force"), "{}", o.stderr);
    std::fs::write(again.join("notes.txt"), "mine").unwrap();
    let o = convert_cli(&dense, &again, &["--quantize", "fp8-block", "--force"]);
    assert!(o.stderr.contains("notes.txt"), "{}", o.stderr);
    assert_eq!(
        std::fs::read_to_string(again.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn deepseek_and_gpt_oss_quantize_by_the_rules_their_checkpoints_were_made_with() {
    // Neither publishes a weight quantizer. DeepSeek-V3's block FP8 is compressed-tensors' block
    // rule in float32, so on float32 inputs it must give compressed-tensors' bytes; gpt-oss's
    // MXFP4 is torchao's RCEIL rule (OpenAI's ROUND_UP), so it must give torchao's bytes. Refused
    // inputs stay refused. The one case whose NaN bits differ is the one listed above for torchao.
    use dtcast::quant::quantize;
    let quantize_cases = fixture("scaled/quantize.json.gz");
    let inputs = quantize_cases["inputs"].as_object().unwrap();
    let mut compared = 0;
    for case in quantize_cases["cases"].as_array().unwrap() {
        let (id, reference) = (
            case["id"].as_str().unwrap(),
            case["scheme"].as_str().unwrap(),
        );
        let input = stored(&inputs[case["input"].as_str().unwrap()]);
        let ours = match (reference, input.dtype) {
            ("ct_fp8_block", DType::Float32) => "deepseek_v3_fp8_block",
            ("ao_mxfp4_rceil", _) if id != "ao_mxfp4_rceil/nonfinite_bfloat16" => "gpt_oss_mxfp4",
            _ => continue,
        };
        compared += 1;
        let scheme = Scheme::named(ours, input.dtype).unwrap();
        let got = quantize(&input.bytes, input.dtype, &input.shape, &scheme);
        if case["ok"] == false {
            assert!(
                got.is_err(),
                "{id} as {ours}: accepted; the reference raised"
            );
            continue;
        }
        let got = got.unwrap_or_else(|e| panic!("{id} as {ours}: {e}"));
        let tensors: HashMap<String, Stored> = case["outputs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), stored(v)))
            .collect();
        let (elements, _, scales, _) = parts(reference, &tensors);
        assert!(got.elements == elements, "{id} as {ours}: elements differ");
        assert!(got.scales == scales, "{id} as {ours}: scales differ");
        assert_eq!(got.global_scale, None, "{id}");
    }
    assert_eq!(compared, 9 + 14, "cases compared");
}

/// A model directory of `layout`'s reference (dense) weights and its config less
/// `quantization_config`, quantized through the CLI with `flags` into `out`.
fn quantize_reference_dir(
    layout: &str,
    dir: &std::path::Path,
    flags: &[&str],
) -> (std::path::PathBuf, dtcast_tests::CliOutput) {
    let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{layout}"));
    let model = dir.join("dense");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::copy(
        src.join("reference_bf16.safetensors"),
        model.join("model.safetensors"),
    )
    .unwrap();
    let mut config = read_json(&src.join("config.json"));
    config
        .as_object_mut()
        .unwrap()
        .remove("quantization_config");
    std::fs::write(model.join("config.json"), config.to_string()).unwrap();
    let out = dir.join("quantized");
    let o = convert_cli(&model, &out, flags);
    (out, o)
}

/// Tensors as (name, dtype, shape), without their bytes.
fn layout(tensors: &[(String, DType, Vec<usize>, Vec<u8>)]) -> Vec<(String, DType, Vec<usize>)> {
    tensors
        .iter()
        .map(|(n, d, s, _)| (n.clone(), *d, s.clone()))
        .collect()
}

/// Every tensor of a file, as [`read_sorted`] gives them.
type Tensors = Vec<(String, DType, Vec<usize>, Vec<u8>)>;

/// [`quantize_reference_dir`], which must succeed and write the fixture's `quantization_config`
/// and tensors (names, dtypes, shapes): the fixture's directory, the output directory, and the
/// output's and the fixture's tensors.
fn quantize_as_fixture(
    fixture: &str,
    dir: &std::path::Path,
    flags: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, Tensors, Tensors) {
    let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{fixture}"));
    let (out, o) = quantize_reference_dir(fixture, dir, flags);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        read_json(&out.join("config.json"))["quantization_config"],
        read_json(&src.join("config.json"))["quantization_config"]
    );
    let ours = read_sorted(&out.join("model.safetensors"));
    let theirs = read_sorted(&src.join("model.safetensors"));
    assert_eq!(layout(&ours), layout(&theirs));
    (src, out, ours, theirs)
}

#[test]
fn quantize_writes_gpt_oss_layout_that_dequantizes_to_the_same_experts() {
    // The dense gpt-oss model (the reference's dequantization of the fixture) quantized with
    // --format gpt-oss: the fixture's tensors (names, dtypes, shapes) and config. RCEIL picks
    // the smallest power of two that holds the block's largest magnitude as 6 or less: where the
    // fixture's block tops out at 3, that is the fixture's scale halved, with every element's
    // value doubled — the same numbers. Everything else is the fixture's bytes, and the output
    // dequantizes to the reference byte for byte.
    let dir = tempfile::tempdir().unwrap();
    let (src, out, ours, theirs) = quantize_as_fixture(
        "gptoss_mxfp4",
        dir.path(),
        &["--quantize", "mxfp4", "--format", "gpt-oss"],
    );
    let find = |v: &[(String, DType, Vec<usize>, Vec<u8>)], name: &str| -> Vec<u8> {
        v.iter().find(|t| t.0 == name).unwrap().3.clone()
    };
    // float4_e2m1fn code -> value in halves (exact integers).
    let halves =
        |c: u8| [0i32, 1, 2, 3, 4, 6, 8, 12][usize::from(c & 7)] * if c & 8 != 0 { -1 } else { 1 };
    let (mut same, mut halved) = (0, 0);
    for (name, _, _, scales) in theirs.iter().filter(|t| t.0.ends_with("_scales")) {
        let base = name.strip_suffix("_scales").unwrap();
        let (our_scales, our_blocks) = (find(&ours, name), find(&ours, &format!("{base}_blocks")));
        let their_blocks = find(&theirs, &format!("{base}_blocks"));
        for (g, (&s_ours, &s_theirs)) in our_scales.iter().zip(scales).enumerate() {
            let codes = |b: &[u8]| -> Vec<i32> {
                b[16 * g..16 * g + 16]
                    .iter()
                    .flat_map(|&x| [halves(x & 0xF), halves(x >> 4)])
                    .collect()
            };
            let (a, b) = (codes(&our_blocks), codes(&their_blocks));
            if s_ours == s_theirs {
                assert_eq!(a, b, "{base} block {g}");
                same += 1;
            } else {
                assert_eq!(s_ours + 1, s_theirs, "{base} block {g}");
                assert_eq!(b.iter().map(|v| v.abs()).max(), Some(6), "{base} block {g}"); // 3.0
                assert_eq!(
                    a,
                    b.iter().map(|v| 2 * v).collect::<Vec<_>>(),
                    "{base} block {g}"
                );
                halved += 1;
            }
        }
    }
    assert!(
        same > 0 && halved > 0,
        "{same} blocks equal, {halved} halved"
    );
    for (name, dtype, shape, bytes) in &theirs {
        if !name.contains("experts.") || name.ends_with("_bias") {
            assert_eq!(
                &find(&ours, name),
                bytes,
                "{name} ({dtype}, {shape:?}) copied"
            );
        }
    }
    let dense = dir.path().join("back");
    let o = convert_cli(&out, &dense, &["--dtype", "bf16"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        read_sorted(&dense.join("model.safetensors")),
        read_sorted(&src.join("reference_bf16.safetensors"))
    );
}

#[test]
fn quantize_writes_deepseek_layout_with_float32_block_scales() {
    // --format deepseek: the fixture's tensors (names, dtypes, shapes) and config; each
    // weight_scale_inv is the block's largest magnitude / 448 in float32 (DeepSeek's rule,
    // computed here from the input), and dequantizing gives each input within half a float8
    // step.
    let dir = tempfile::tempdir().unwrap();
    let (src, out, ours, _) = quantize_as_fixture(
        "deepseek_fp8_block",
        dir.path(),
        &["--quantize", "fp8-block", "--format", "deepseek"],
    );
    let input = read_sorted(&src.join("reference_bf16.safetensors"));
    let dense = dir.path().join("back");
    let o = convert_cli(&out, &dense, &["--dtype", "float32"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let back = read_sorted(&dense.join("model.safetensors"));
    let floats = |b: &[u8], dtype: DType| -> Vec<f32> {
        match dtype {
            DType::BFloat16 => b
                .chunks_exact(2)
                .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
                .collect(),
            _ => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        }
    };
    let mut checked = 0;
    for (name, _, shape, scales) in ours.iter().filter(|t| t.0.ends_with(".weight_scale_inv")) {
        let weight = name.replace(".weight_scale_inv", ".weight");
        let x = input.iter().find(|t| t.0 == weight).unwrap();
        let y = back.iter().find(|t| t.0 == weight).unwrap();
        let (rows, cols) = (x.2[0], x.2[1]);
        let (x, y) = (floats(&x.3, x.1), floats(&y.3, y.1));
        let s = floats(scales, DType::Float32);
        for (b, &scale) in s.iter().enumerate() {
            let (br, bc) = (b / shape[1], b % shape[1]);
            let mut amax = 0f32;
            for r in br * 128..((br + 1) * 128).min(rows) {
                for c in bc * 128..((bc + 1) * 128).min(cols) {
                    amax = amax.max(x[r * cols + c].abs());
                }
            }
            assert_eq!(scale, amax / 448.0, "{name} block {b}");
            for r in br * 128..((br + 1) * 128).min(rows) {
                for c in bc * 128..((bc + 1) * 128).min(cols) {
                    let (xv, yv) = (x[r * cols + c], y[r * cols + c]);
                    let bound = scale * (xv.abs() / scale * 2f32.powi(-4)).max(2f32.powi(-10));
                    assert!(
                        (yv - xv).abs() <= bound,
                        "{weight}[{r}, {c}]: {xv} came back {yv}"
                    );
                }
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 8);
}

#[test]
fn a_format_refuses_what_it_cannot_store_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    for (layout, flags, message) in [
        (
            "deepseek_fp8_block",
            &["--quantize", "mxfp4", "--format", "deepseek"][..],
            "--format deepseek stores fp8-block only",
        ),
        (
            "gptoss_mxfp4",
            &["--quantize", "fp8-block", "--format", "gpt-oss"][..],
            "--format gpt-oss stores mxfp4 only",
        ),
        (
            "deepseek_fp8_block",
            &["--quantize", "mxfp4", "--format", "gpt-oss"][..],
            "no tensor of the checkpoint is one it quantizes (3-D MoE expert parameters",
        ),
        (
            "deepseek_fp8_block",
            &["--quantize", "fp8-block", "--format", "deepseek-v3"][..],
            "the formats are compressed-tensors, deepseek, gpt-oss",
        ),
    ] {
        let case = dir.path().join(format!("{layout}-{}", flags[1]));
        let (out, o) = quantize_reference_dir(layout, &case, flags);
        assert_ne!(o.code, 0, "{flags:?}");
        assert!(o.stderr.contains(message), "{flags:?}: {}", o.stderr);
        assert!(!out.exists(), "{flags:?}: {} was written", out.display());
    }
}

#[test]
fn a_sharded_dense_checkpoint_quantizes_shard_by_shard_with_a_new_index() {
    // compressed-tensors' dense FP8-block model split in two shards, quantized: the output
    // shards hold compressed-tensors' own tensors (weights and scales beside each other), and
    // the new index names each in its shard. A --ignore glob that only the second shard
    // matches leaves those weights dense, as in one file.
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block");
    let dir = tempfile::tempdir().unwrap();
    let index = split_in_two_shards(&src.join("reference_bf16.safetensors"), dir.path());
    let out = dir.path().join("fp8");
    let o = convert_cli(&index, &out, &["--quantize", "fp8-block"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("quantized 8 weights"), "{}", o.stdout);
    assert_sharded_equals(&out, &read_sorted(&src.join("model.safetensors")));
    let out = dir.path().join("fp8-ignore");
    let o = convert_cli(
        &index,
        &out,
        &[
            "--quantize",
            "fp8-block",
            "--ignore",
            "model.layers.1.mlp.*",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let quantized = read_sorted(&src.join("model.safetensors"));
    let dense = read_sorted(&src.join("reference_bf16.safetensors"));
    let mut want: Tensors = quantized
        .into_iter()
        .filter(|t| !t.0.starts_with("model.layers.1.mlp."))
        .chain(
            dense
                .into_iter()
                .filter(|t| t.0.starts_with("model.layers.1.mlp.")),
        )
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_sharded_equals(&out, &want);
}

#[test]
fn a_weight_larger_than_a_band_quantizes_and_dequantizes_in_bands_as_it_does_whole() {
    // Weights of several bands (8 MiB of input or dense output) are quantized and dequantized
    // band by band (whole rows; whole 128-row blocks; whole gpt-oss experts): each file equals
    // the library's quantization / dequantization of the whole tensor, for a per-tensor scale,
    // 2-D blocks, groups with a global scale, and gpt-oss's transposed experts.
    use dtcast::layer::checkpoint::{save, Checkpoint};

    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut values = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
            })
            .collect()
    };
    let (linear_values, expert_values) = (values(1024 * 4096), values(8 * 512 * 1024));
    let linear = dtcast::Tensor::from_vec(linear_values.clone(), &[1024, 4096]).unwrap();
    let experts = dtcast::Tensor::from_vec(expert_values.clone(), &[8, 512, 1024]).unwrap();
    // gpt-oss quantizes each expert's [512, 1024] transposed: [8 * 1024, 512].
    let mut transposed = vec![0f32; expert_values.len()];
    for (i, v) in expert_values.iter().enumerate() {
        let (e, k, r) = (i / (512 * 1024), i / 1024 % 512, i % 1024);
        transposed[e * 512 * 1024 + r * 512 + k] = *v;
    }
    let f32_bytes = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let dense = dir.path().join("dense.safetensors");
    save(
        &dense,
        &[
            ("model.layers.0.mlp.up_proj.weight".to_owned(), linear),
            (
                "model.layers.0.mlp.experts.gate_up_proj".to_owned(),
                experts,
            ),
        ],
        &[],
    )
    .unwrap();
    for (scheme, format, reference) in [
        ("fp8-tensor", "compressed-tensors", "ct_fp8_tensor"),
        ("fp8-block", "compressed-tensors", "ct_fp8_block"),
        ("nvfp4", "compressed-tensors", "ct_nvfp4"),
        ("mxfp4", "gpt-oss", "gpt_oss_mxfp4"),
    ] {
        let quantized = dir.path().join(format!("{scheme}.safetensors"));
        let o = convert_cli(
            &dense,
            &quantized,
            &["--quantize", scheme, "--format", format],
        );
        assert_eq!(o.code, 0, "{scheme}: {}", o.stderr);
        let back = dir.path().join(format!("{scheme}-back.safetensors"));
        let o = convert_cli(&quantized, &back, &["--dtype", "float32"]);
        assert_eq!(o.code, 0, "{scheme}: {}", o.stderr);
        let q = Checkpoint::open(&quantized).unwrap();
        let weights = dtcast::layer::checkpoint::detect_quantized(&q, None).unwrap();
        let [w] = weights.as_slice() else {
            panic!("{scheme}: {} quantized weights", weights.len());
        };
        let read = |i: usize| q.read(&q.entries()[i]).unwrap();
        let global = w
            .global
            .map(|g| f32::from_le_bytes(read(g)[..4].try_into().unwrap()));
        let (elements, scales) = (read(w.elements), read(w.scales));
        let scheme_of = Scheme::named(reference, DType::Float32).unwrap();
        let (input, matrix) = match format {
            "gpt-oss" => (f32_bytes(&transposed), [8 * 1024, 512]),
            _ => (f32_bytes(&linear_values), [1024, 4096]),
        };
        assert!(input.len() > 8 << 20, "{scheme}: one band only");
        let q_whole = quantize(&input, DType::Float32, &matrix, &scheme_of).unwrap();
        assert!(
            elements == q_whole.elements,
            "{scheme}: the banded elements differ"
        );
        assert_eq!(scales, q_whole.scales, "{scheme}: the banded scales differ");
        assert_eq!(global, q_whole.global_scale, "{scheme}");
        let whole = dequantize(
            &Quantized {
                elements: &elements,
                shape: &w.shape,
                scales: &scales,
                global_scale: global,
            },
            &scheme_of,
            DType::Float32,
        )
        .unwrap();
        let got = read_sorted(&back);
        let t = got.iter().find(|t| t.0 == w.name).unwrap();
        assert_eq!(t.2, w.dense_shape, "{scheme}");
        assert!(t.3.len() > 8 << 20, "{scheme}: one chunk only");
        assert!(t.3 == whole, "{scheme}: the banded dequantization differs");
    }
}

/// A copy of the fixture model `fixture` in `dir/model`, with `extra` tensors added and
/// `config.json` edited by `edit`.
fn fixture_model_with(
    fixture: &str,
    dir: &std::path::Path,
    extra: Vec<(String, dtcast::Tensor)>,
    edit: impl FnOnce(&mut serde_json::Value),
) -> std::path::PathBuf {
    use dtcast::layer::checkpoint::{load_map, save};
    let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{fixture}"));
    let model = dir.join("model");
    std::fs::create_dir(&model).unwrap();
    let mut tensors: Vec<(String, dtcast::Tensor)> = load_map(src.join("model.safetensors"))
        .unwrap()
        .into_iter()
        .collect();
    tensors.extend(extra);
    save(model.join("model.safetensors"), &tensors, &[]).unwrap();
    let mut config = read_json(&src.join("config.json"));
    edit(&mut config);
    std::fs::write(model.join("config.json"), config.to_string()).unwrap();
    model
}

/// The key-value cache scales compressed-tensors writes for layer `layer` (`kv_cache_scheme`):
/// one float32 each for the keys and the values.
fn kv_cache_scales(layer: usize) -> Vec<(String, dtcast::Tensor)> {
    ["k_scale", "v_scale"]
        .into_iter()
        .map(|p| {
            (
                format!("model.layers.{layer}.self_attn.{p}"),
                dtcast::Tensor::from_vec(vec![0.0123f32], &[1]).unwrap(),
            )
        })
        .collect()
}

/// compressed-tensors' `kv_cache_scheme` for FP8 key-value caches, as llm-compressor writes it.
fn with_kv_cache_scheme(config: &mut serde_json::Value) {
    config["quantization_config"]["kv_cache_scheme"] = serde_json::json!({
        "dynamic": false, "group_size": null, "num_bits": 8, "strategy": "tensor",
        "symmetric": true, "type": "float"});
}

#[test]
fn key_value_cache_scales_go_with_the_quantization_config_that_dequantizing_removes() {
    // An FP8 checkpoint from llm-compressor with an FP8 key-value cache holds
    // `self_attn.k_scale` / `v_scale` beside the weights. Dequantized, config.json has no
    // quantization_config, so no loader would use them (vLLM skips them, transformers warns of
    // unexpected keys): they are dropped, and said. Kept weights keep the config, and the scales.
    let src = dtcast_tests::fixture_path("scaled/checkpoints/ct_fp8_block");
    let dir = tempfile::tempdir().unwrap();
    let kv = [0, 1].into_iter().flat_map(kv_cache_scales).collect();
    let model = fixture_model_with("ct_fp8_block", dir.path(), kv, with_kv_cache_scheme);
    let out = dir.path().join("dense");
    let o = to_bf16_cli(&model, &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(
            "dequantized 8 quantized weights, dropped 4 key-value cache (attention) quantization \
             parameters"
        ),
        "{}",
        o.stdout
    );
    assert_eq!(
        read_sorted(&out.join("model.safetensors")),
        read_sorted(&src.join("reference_bf16.safetensors"))
    );
    assert!(read_json(&out.join("config.json"))
        .get("quantization_config")
        .is_none());

    // Sharded: the new index names no dropped tensor either.
    let sharded = dir.path().join("sharded");
    std::fs::create_dir(&sharded).unwrap();
    split_in_two_shards(&model.join("model.safetensors"), &sharded);
    std::fs::copy(model.join("config.json"), sharded.join("config.json")).unwrap();
    let out = dir.path().join("sharded-dense");
    let o = to_bf16_cli(&sharded, &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let index = read_json(&out.join("model.safetensors.index.json"));
    let map = index["weight_map"].as_object().unwrap();
    assert!(!map.keys().any(|k| k.ends_with("_scale")), "{map:?}");
    assert_sharded_equals(&out, &read_sorted(&src.join("reference_bf16.safetensors")));

    // One weight kept quantized: the quantization config stays, and so do the cache's scales.
    let out = dir.path().join("kept");
    let o = convert_cli(
        &model,
        &out,
        &[
            "--dtype",
            "bf16",
            "--keep",
            "model.layers.1.mlp.up_proj.weight",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let names: Vec<String> = read_sorted(&out.join("model.safetensors"))
        .into_iter()
        .map(|t| t.0)
        .collect();
    for (name, _) in kv_cache_scales(0).into_iter().chain(kv_cache_scales(1)) {
        assert!(names.contains(&name), "{name} dropped");
    }
    let config = read_json(&out.join("config.json"));
    assert_eq!(
        config["quantization_config"]["kv_cache_scheme"]["num_bits"],
        8
    );
}

/// The fixture `src`'s `quantization_config` with `modules` appended to each list `keys` names
/// (an absent list is empty).
fn listing_dense(
    src: &std::path::Path,
    keys: &[&str],
    modules: &[serde_json::Value],
) -> serde_json::Value {
    let theirs = read_json(&src.join("config.json"))["quantization_config"].clone();
    let mut want = theirs.clone();
    for key in keys {
        let before = (theirs.get(*key)).and_then(|v| v.as_array().cloned());
        want[*key] = (before.unwrap_or_default().into_iter())
            .chain(modules.iter().cloned())
            .collect();
    }
    want
}

#[test]
fn a_config_keeps_describing_the_weights_kept_quantized_and_lists_the_rest_as_dense() {
    // --keep keeps some quantized weights while the others are dequantized: config.json's
    // quantization_config must stay (the kept weights are read through it) and must say that
    // the dequantized weights' modules are dense, in the keys each format's loaders read —
    // compressed-tensors' `ignore`, transformers' `modules_to_not_convert` and vLLM's
    // `ignored_layers` for DeepSeek's FP8. Removing it (as before) left a packed weight that
    // loaders read as missing.
    let layers = |modules: &[&str]| -> Vec<String> {
        [0, 1]
            .into_iter()
            .flat_map(|l| modules.iter().map(move |m| format!("model.layers.{l}.{m}")))
            .collect()
    };
    let all = layers(&[
        "mlp.down_proj",
        "mlp.up_proj",
        "self_attn.o_proj",
        "self_attn.q_proj",
    ]);
    let kept = "model.layers.0.self_attn.q_proj";
    let dense: Vec<serde_json::Value> = (all.iter())
        .filter(|m| *m != kept)
        .map(|m| serde_json::Value::from(m.as_str()))
        .collect();
    for (fixture, keys) in [
        ("ct_nvfp4", &["ignore"][..]),
        (
            "deepseek_fp8_block",
            &["modules_to_not_convert", "ignored_layers"][..],
        ),
    ] {
        let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{fixture}"));
        let dir = tempfile::tempdir().unwrap();
        let model = fixture_model_with(fixture, dir.path(), Vec::new(), |_| {});
        let out = dir.path().join("out");
        let o = convert_cli(
            &model,
            &out,
            &["--dtype", "bf16", "--keep", &format!("{kept}.weight*")],
        );
        assert_eq!(o.code, 0, "{fixture}: {}", o.stderr);
        assert!(
            o.stdout
                .contains("dequantized 7 quantized weights, kept 1 quantized weights quantized"),
            "{fixture}: {}",
            o.stdout
        );
        let ours = read_json(&out.join("config.json"))["quantization_config"].clone();
        let want = listing_dense(&src, keys, &dense);
        assert_eq!(ours, want, "{fixture}");
        // The kept weight's parts are there as they were; the rest is the reference's.
        let reference = read_sorted(&src.join("reference_bf16.safetensors"));
        let input = read_sorted(&src.join("model.safetensors"));
        let got = read_sorted(&out.join("model.safetensors"));
        let mut want: Tensors = (reference.into_iter())
            .filter(|t| t.0 != format!("{kept}.weight"))
            .chain(input.into_iter().filter(|t| t.0.starts_with(kept)))
            .collect();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(layout(&got), layout(&want), "{fixture}");
        assert!(got == want, "{fixture}: bytes differ");
    }
}

#[test]
fn a_module_is_dequantized_or_quantized_as_a_whole() {
    // gpt-oss keeps two quantized weights in one module (`mlp.experts`: gate_up_proj and
    // down_proj), and its config marks whole modules as not converted: keeping one of them
    // quantized while dequantizing the other (or quantizing one and --ignore-ing the other)
    // would write a config that misdescribes one. Both are errors naming the module, before
    // anything is written.
    let dir = tempfile::tempdir().unwrap();
    let src = fixture_model_with("gptoss_mxfp4", dir.path(), Vec::new(), |_| {});
    let out = dir.path().join("out");
    let o = convert_cli(
        &src,
        &out,
        &[
            "--dtype",
            "bf16",
            "--keep",
            "model.layers.0.mlp.experts.gate_up_proj_*",
        ],
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stderr.contains(
            "`model.layers.0.mlp.experts.down_proj` would be stored dense and \
             `model.layers.0.mlp.experts.gate_up_proj` quantized, but both are weights of the \
             module `model.layers.0.mlp.experts`"
        ) && o.stderr.contains("--keep 'model.layers.0.mlp.experts.*'"),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
    // The whole module kept: fine, and its layer's experts stay quantized.
    let o = convert_cli(
        &src,
        &out,
        &["--dtype", "bf16", "--keep", "model.layers.0.mlp.experts.*"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = read_json(&out.join("config.json"));
    let modules = config["quantization_config"]["modules_to_not_convert"]
        .as_array()
        .unwrap();
    assert_eq!(
        modules.last().and_then(|m| m.as_str()),
        Some("model.layers.1.mlp.experts")
    );
    assert!(!modules.contains(&"model.layers.0.mlp.experts".into()));

    let (out, o) = quantize_reference_dir(
        "gptoss_mxfp4",
        &dir.path().join("q"),
        &[
            "--quantize",
            "mxfp4",
            "--format",
            "gpt-oss",
            "--ignore",
            "model.layers.1.mlp.experts.down_proj",
        ],
    );
    assert_ne!(o.code, 0);
    assert!(
        o.stderr
            .contains("both are weights of the module `model.layers.1.mlp.experts`")
            && o.stderr.contains("--ignore 'model.layers.1.mlp.experts.*'"),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
}

#[test]
fn quantizing_with_ignore_lists_the_modules_left_dense_in_each_format_s_config() {
    // --ignore leaves weights dense; the config must say so, or a loader expects them quantized
    // (DeepSeek's config named no module before: transformers would build an FP8 layer for a
    // bfloat16 weight). Each format lists the exact modules, in the keys its loaders read.
    let dir = tempfile::tempdir().unwrap();
    for (fixture, format, ignore, keys, module) in [
        (
            "deepseek_fp8_block",
            "deepseek",
            "model.layers.*.self_attn.o_proj.weight",
            &["modules_to_not_convert", "ignored_layers"][..],
            &[
                "model.layers.0.self_attn.o_proj",
                "model.layers.1.self_attn.o_proj",
            ][..],
        ),
        (
            "ct_fp8_block",
            "compressed-tensors",
            "model.layers.1.mlp.*",
            &["ignore"][..],
            &["model.layers.1.mlp.down_proj", "model.layers.1.mlp.up_proj"][..],
        ),
        (
            "gptoss_mxfp4",
            "gpt-oss",
            "model.layers.1.mlp.experts.*_proj",
            &["modules_to_not_convert"][..],
            &["model.layers.1.mlp.experts"][..],
        ),
    ] {
        let src = dtcast_tests::fixture_path(&format!("scaled/checkpoints/{fixture}"));
        let (out, o) = quantize_reference_dir(
            fixture,
            &dir.path().join(fixture),
            &[
                "--quantize",
                if format == "gpt-oss" {
                    "mxfp4"
                } else {
                    "fp8-block"
                },
                "--format",
                format,
                "--ignore",
                ignore,
            ],
        );
        assert_eq!(o.code, 0, "{fixture}: {}", o.stderr);
        let module: Vec<serde_json::Value> = module.iter().map(|&m| m.into()).collect();
        let want = listing_dense(&src, keys, &module);
        let ours = read_json(&out.join("config.json"))["quantization_config"].clone();
        assert_eq!(ours, want, "{fixture}");
    }
}

#[test]
fn a_quantized_layout_dtcast_does_not_read_is_never_cast_as_if_dense() {
    // ModelOpt's NVFP4 with AWQ names its scales as compressed-tensors does, beside an
    // activation pre-scale its weight was quantized against: neither read as compressed-tensors
    // nor as plain NVFP4, and refused by name; cast to bfloat16 like a floating tensor, its
    // scales would be rounded and the model silently changed. Such a module must stay as it is
    // (--keep), quantizing such a file is refused, and a config.json naming a layout dtcast does
    // not read is refused by name.
    use dtcast::layer::checkpoint::save;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("awq");
    std::fs::create_dir(&model).unwrap();
    let modelopt = "model.layers.0.self_attn.o_proj";
    let nvfp4 = vec![
        (
            format!("{modelopt}.weight"),
            dtcast::Tensor::from_vec(vec![0x21u8; 32], &[4, 8]).unwrap(),
        ),
        (
            format!("{modelopt}.weight_scale"),
            dtcast::Tensor::from_bytes(&[0x38; 4], DType::Float8E4M3Fn, &[4, 1]).unwrap(),
        ),
        (
            format!("{modelopt}.weight_scale_2"),
            dtcast::Tensor::from_vec(vec![0.5f32], &[1]).unwrap(),
        ),
        (
            format!("{modelopt}.pre_quant_scale"),
            dtcast::Tensor::from_vec(vec![1.5f32; 8], &[8]).unwrap(),
        ),
        (
            "model.norm.weight".to_owned(),
            dtcast::Tensor::from_vec(vec![1.0f32; 8], &[8]).unwrap(),
        ),
    ];
    let file = model.join("model.safetensors");
    save(&file, &nvfp4, &[]).unwrap();
    let (input, out) = (file.to_str().unwrap(), dir.path().join("out.safetensors"));
    let o = convert_cli(input, &out, &["--dtype", "bf16"]);
    assert!(
        o.code != 0
            && o.stderr.contains(&format!(
                "`{modelopt}.pre_quant_scale` makes `{modelopt}` a weight quantized by NVIDIA \
                 ModelOpt's AWQ"
            ))
            && o.stderr.contains(&format!("--keep '{modelopt}.*'")),
        "{}",
        o.stderr
    );
    assert!(!out.exists());
    // Kept: the module's tensors are the input's bytes, the rest converted.
    let keep = format!("{modelopt}.*");
    let o = convert_cli(input, &out, &["--dtype", "bf16", "--keep", &keep]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let before = read_sorted(&file);
    let after = read_sorted(&out);
    for (b, a) in before.iter().zip(&after) {
        if b.0.starts_with(modelopt) {
            assert_eq!(a, b);
        } else {
            assert_eq!((a.0.as_str(), a.1), ("model.norm.weight", DType::BFloat16));
        }
    }
    // inspect names the module and its layout.
    let o = dtcast_tests::dtcast_cli(&["inspect", input], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(&format!(
            "quantized in a layout dtcast does not read: 1 modules; `convert` leaves them only \
             with --keep 'MODULE.*'\n  {modelopt}  NVIDIA ModelOpt's AWQ"
        )),
        "{}",
        o.stdout
    );
    // Quantizing it is refused.
    let o = convert_cli(
        input,
        dir.path().join("q.safetensors"),
        &["--quantize", "fp8-block"],
    );
    assert!(
        o.code != 0 && o.stderr.contains("it is quantized already"),
        "{}",
        o.stderr
    );
    // A config.json that names such a layout: refused by name, whatever the tensors.
    std::fs::write(
        model.join("config.json"),
        r#"{"quantization_config": {"quant_method": "hqq", "nbits": 4}}"#,
    )
    .unwrap();
    let o = convert_cli(
        input,
        &out,
        &["--dtype", "bf16", "--force", "--keep", &keep],
    );
    assert!(
        o.code != 0
            && o.stderr.contains(
                "config.json's quantization_config says `hqq`, a quantized layout dtcast does \
                 not read (it reads `auto-round` (GPTQ or AWQ), `awq` (AWQ), \
                 `bitsandbytes` (bitsandbytes), \
                 `compressed-tensors` (compressed-tensors), `fp8` (deepseek), `gptq` (GPTQ), \
                 `modelopt` (ModelOpt), `mxfp4` (gpt-oss))"
            ),
        "{}",
        o.stderr
    );
}

#[test]
fn vllm_fp8_per_tensor_checkpoints_dequantize_with_their_scales() {
    // vLLM's `fp8` method (AutoFP8 wrote it) stores a per-tensor FP8 weight as compressed-tensors
    // does: `weight` float8_e4m3fn and a float32 `weight_scale` multiplier (0-d), with a static
    // `input_scale` and the older `self_attn.kv_scale`. Dequantized: each element times the
    // scale, in float32, then bfloat16 (values chosen so that every product is exact: e4m3 0x38
    // = 1.0, 0x40 = 2.0, 0xB8 = -1.0, 0x4C = 6.0 (exponent 9 - 7, mantissa 1.5); scales 0.25
    // and 3.0).
    use dtcast::layer::checkpoint::save;
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    let fp8 = |bytes: &[u8]| dtcast::Tensor::from_bytes(bytes, DType::Float8E4M3Fn, &[2, 2]);
    let scalar = |v: f32| dtcast::Tensor::from_vec(vec![v], &[]).unwrap();
    let (a, b) = ("model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj");
    let tensors = vec![
        (
            format!("{a}.weight"),
            fp8(&[0x38, 0x40, 0xB8, 0x4C]).unwrap(),
        ),
        (format!("{a}.weight_scale"), scalar(0.25)),
        (format!("{a}.input_scale"), scalar(0.01)),
        (
            format!("{b}.weight"),
            fp8(&[0x40, 0x38, 0x4C, 0xB8]).unwrap(),
        ),
        (format!("{b}.weight_scale"), scalar(3.0)),
        (format!("{b}.input_scale"), scalar(0.02)),
        ("model.layers.0.self_attn.kv_scale".to_owned(), scalar(1.5)),
        (
            "model.norm.weight".to_owned(),
            dtcast::Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap(),
        ),
    ];
    save(model.join("model.safetensors"), &tensors, &[]).unwrap();
    std::fs::write(
        model.join("config.json"),
        r#"{"quantization_config": {"activation_scheme": "static", "ignored_layers": ["lm_head"],
            "quant_method": "fp8"}}"#,
    )
    .unwrap();
    let out = dir.path().join("dense");
    let o = to_bf16_cli(&model, &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains(
            "dequantized 2 quantized weights (and dropped their 2 activation quantization \
             parameters), dropped 1 key-value cache"
        ),
        "{}",
        o.stdout
    );
    let bf16 = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    };
    let got = read_sorted(&out.join("model.safetensors"));
    let want = vec![
        (
            format!("{b}.weight"),
            DType::BFloat16,
            vec![2, 2],
            bf16(&[6.0, 3.0, 18.0, -3.0]),
        ),
        (
            format!("{a}.weight"),
            DType::BFloat16,
            vec![2, 2],
            bf16(&[0.25, 0.5, -0.25, 1.5]),
        ),
        (
            "model.norm.weight".to_owned(),
            DType::BFloat16,
            vec![2],
            bf16(&[1.0, 2.0]),
        ),
    ];
    assert_eq!(got, want);
    assert!(read_json(&out.join("config.json"))
        .get("quantization_config")
        .is_none());
    // One kept: vLLM's `ignored_layers` (and transformers' `modules_to_not_convert`) name the
    // other as dense.
    let out = dir.path().join("kept");
    let o = convert_cli(
        &model,
        &out,
        &["--dtype", "bf16", "--keep", &format!("{a}.*")],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let config = read_json(&out.join("config.json"))["quantization_config"].clone();
    assert_eq!(config["ignored_layers"], serde_json::json!(["lm_head", b]));
    assert_eq!(config["modules_to_not_convert"], serde_json::json!([b]));
}

/// A copy of a ModelOpt fixture's model directory (`modelopt_nvfp4`, `modelopt_fp8`; without its
/// reference) in `dir/model`; its `config.json` left out where `config` is false.
fn modelopt_model(fixture: &str, dir: &std::path::Path, config: bool) -> std::path::PathBuf {
    let src = dtcast_tests::fixture_path(fixture);
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    for f in [
        "model.safetensors",
        "config.json",
        "hf_quant_config.json",
        "generation_config.json",
    ] {
        if config || f == "model.safetensors" {
            std::fs::copy(src.join(f), model.join(f)).unwrap();
        }
    }
    model
}

/// `model` (a ModelOpt export with 14 quantized weights) converted to bfloat16 at `out`:
/// `reference` (ModelOpt's own dequantization) byte for byte, and no quantization config left
/// (`config.json`'s, `hf_quant_config.json`). Returns what the conversion printed.
fn converts_to_modelopt_reference(
    model: &std::path::Path,
    out: &std::path::Path,
    reference: &[(String, DType, Vec<usize>, Vec<u8>)],
) -> String {
    let o = to_bf16_cli(model, out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("dequantized 14 quantized weights"),
        "{}",
        o.stdout
    );
    assert!(read_sorted(&out.join("model.safetensors")) == reference);
    assert!(read_json(&out.join("config.json"))
        .get("quantization_config")
        .is_none());
    assert!(!out.join("hf_quant_config.json").exists());
    o.stdout
}

/// What `dtcast inspect` prints about `model`.
fn inspect(model: &std::path::Path) -> String {
    let o = dtcast_tests::dtcast_cli(&["inspect", model.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.stdout
}

#[test]
fn modelopt_nvfp4_dequantizes_as_modelopt_does() {
    // A checkpoint NVIDIA ModelOpt 0.47 exported (NVFP4: packed `weight`, float8 `weight_scale`,
    // float32 `weight_scale_2`, `input_scale`) converts to ModelOpt's own bfloat16
    // dequantization byte for byte; the directory loses its quantization config and ModelOpt's
    // `hf_quant_config.json` (vLLM would read it and expect quantized weights), and keeps its
    // other files.
    let src = dtcast_tests::fixture_path("modelopt_nvfp4");
    let reference = read_sorted(&src.join("reference_bf16.safetensors"));
    let dir = tempfile::tempdir().unwrap();
    let model = modelopt_model("modelopt_nvfp4", dir.path(), true);
    let out = dir.path().join("dense");
    let printed = converts_to_modelopt_reference(&model, &out, &reference);
    assert!(
        printed.contains(
            "dequantized 14 quantized weights (and dropped their 14 activation quantization \
             parameters)"
        ),
        "{printed}"
    );
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["config.json", "generation_config.json", "model.safetensors"]
    );
    // The tensors alone say the layout.
    let bare = modelopt_model("modelopt_nvfp4", &dir.path().join("bare"), false);
    let out = dir.path().join("bare.safetensors");
    let o = to_bf16_cli(&bare.join("model.safetensors"), &out);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(read_sorted(&out) == reference);
    // inspect names the scheme.
    let printed = inspect(&model);
    assert!(
        printed.contains("quantized: 14 weights (modelopt_nvfp4)")
            && printed.contains(
                "model.layers.0.mlp.down_proj.weight  modelopt_nvfp4  float4_e2m1fn elements, \
                 float8_e4m3fn scales [64, 8] (a scale per 16 elements of a row), a global scale"
            ),
        "{printed}"
    );
}

#[test]
fn a_modelopt_checkpoint_with_weights_kept_quantized_lists_the_rest_in_both_configs() {
    // --keep keeps layer 1's MLP quantized: config.json's `ignore` and hf_quant_config.json's
    // `exclude_modules` (ModelOpt's two descriptions of what is dense) both gain the 11
    // dequantized modules; the kept weights' tensors are the input's.
    let src = dtcast_tests::fixture_path("modelopt_nvfp4");
    let dir = tempfile::tempdir().unwrap();
    let model = modelopt_model("modelopt_nvfp4", dir.path(), true);
    let out = dir.path().join("out");
    let o = convert_cli(
        &model,
        &out,
        &["--dtype", "bf16", "--keep", "model.layers.1.mlp.*"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut dense: Vec<serde_json::Value> = Vec::new();
    for layer in 0..2 {
        let mlp: &[&str] = if layer == 0 {
            &["mlp.down_proj", "mlp.gate_proj", "mlp.up_proj"]
        } else {
            &[]
        };
        for m in mlp.iter().chain(&[
            "self_attn.k_proj",
            "self_attn.o_proj",
            "self_attn.q_proj",
            "self_attn.v_proj",
        ]) {
            dense.push(format!("model.layers.{layer}.{m}").into());
        }
    }
    assert_eq!(dense.len(), 11);
    let want = listing_dense(&src, &["ignore"], &dense);
    assert_eq!(
        read_json(&out.join("config.json"))["quantization_config"],
        want
    );
    let hf = read_json(&out.join("hf_quant_config.json"));
    let mut want = read_json(&src.join("hf_quant_config.json"));
    let excluded = want["quantization"]["exclude_modules"]
        .as_array_mut()
        .unwrap();
    excluded.extend(dense);
    assert_eq!(hf, want);
    let input = read_sorted(&src.join("model.safetensors"));
    let got = read_sorted(&out.join("model.safetensors"));
    for t in input
        .iter()
        .filter(|t| t.0.starts_with("model.layers.1.mlp."))
    {
        assert!(got.contains(t), "{} changed", t.0);
    }
}

#[test]
fn modelopt_fp8_dequantizes_as_modelopt_does() {
    // ModelOpt 0.47's per-tensor FP8 export (`weight` float8_e4m3fn, a float32 `weight_scale`,
    // named as compressed-tensors' per-tensor FP8) dequantizes in the output dtype: element and
    // scale each rounded to bfloat16, then their product (`FP8QTensor.dequantize`), which differs
    // from compressed-tensors' float32 product in 30% of these elements. Its config.json
    // says which: the output is ModelOpt's own dequantization byte for byte.
    let src = dtcast_tests::fixture_path("modelopt_fp8");
    let reference = read_sorted(&src.join("reference_bf16.safetensors"));
    let dir = tempfile::tempdir().unwrap();
    let model = modelopt_model("modelopt_fp8", dir.path(), true);
    converts_to_modelopt_reference(&model, &dir.path().join("dense"), &reference);
    let printed = inspect(&model);
    assert!(
        printed.contains("quantized: 14 weights (modelopt_fp8)"),
        "{printed}"
    );
    // A per-channel scale: not read, and said so.
    let channel = dir.path().join("channel");
    std::fs::create_dir(&channel).unwrap();
    std::fs::copy(model.join("config.json"), channel.join("config.json")).unwrap();
    dtcast::layer::checkpoint::save(
        channel.join("model.safetensors"),
        &[
            (
                "model.layers.0.mlp.up_proj.weight".to_owned(),
                dtcast::Tensor::from_bytes(&[0x38; 4], DType::Float8E4M3Fn, &[2, 2]).unwrap(),
            ),
            (
                "model.layers.0.mlp.up_proj.weight_scale".to_owned(),
                dtcast::Tensor::from_vec(vec![0.5f32, 0.25], &[2]).unwrap(),
            ),
        ],
        &[],
    )
    .unwrap();
    let o = to_bf16_cli(&channel, &dir.path().join("channel-dense"));
    assert!(
        o.code != 0
            && o.stderr.contains(
                "`model.layers.0.mlp.up_proj.weight_scale` is float32 with 2 elements: dtcast \
                 reads ModelOpt's FP8 with one float32 scale per tensor"
            ),
        "{}",
        o.stderr
    );
}

#[test]
fn an_older_modelopt_export_is_read_by_its_hf_quant_config() {
    // Older ModelOpt exports describe their quantization in `hf_quant_config.json` only (no
    // `quantization_config` in config.json; vLLM reads that file). Their FP8 tensors are named
    // as compressed-tensors' per-tensor FP8, whose float32 product would differ from ModelOpt's
    // bfloat16 one in 30% of these elements: the file says whose arithmetic applies, and the
    // output is ModelOpt's own dequantization byte for byte.
    let src = dtcast_tests::fixture_path("modelopt_fp8");
    let reference = read_sorted(&src.join("reference_bf16.safetensors"));
    let dir = tempfile::tempdir().unwrap();
    let model = modelopt_model("modelopt_fp8", dir.path(), true);
    let mut config = read_json(&model.join("config.json"));
    config
        .as_object_mut()
        .unwrap()
        .remove("quantization_config");
    let config_text = serde_json::to_string_pretty(&config).unwrap();
    std::fs::write(model.join("config.json"), &config_text).unwrap();
    let out = dir.path().join("dense");
    converts_to_modelopt_reference(&model, &out, &reference);
    let printed = inspect(&model);
    assert!(
        printed.contains("quantized: 14 weights (modelopt_fp8)"),
        "{printed}"
    );
    // Layer 1's MLP kept: hf_quant_config.json, the only description, lists the 11 dequantized
    // modules; config.json gains no quantization_config (that file stays the one description).
    let kept = dir.path().join("kept");
    let o = convert_cli(
        &model,
        &kept,
        &["--dtype", "bf16", "--keep", "model.layers.1.mlp.*"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let hf = read_json(&kept.join("hf_quant_config.json"));
    let excluded = hf["quantization"]["exclude_modules"].as_array().unwrap();
    assert_eq!(excluded.len(), 2 + 11, "{hf}");
    assert!(excluded.contains(&"model.layers.0.mlp.up_proj".into()));
    assert!(!excluded.contains(&"model.layers.1.mlp.up_proj".into()));
    assert!(read_json(&kept.join("config.json"))
        .get("quantization_config")
        .is_none());
    // Without the file nothing says ModelOpt: the tensors read as compressed-tensors' per-tensor
    // FP8 (the float32 product), which is not ModelOpt's output.
    std::fs::remove_file(model.join("hf_quant_config.json")).unwrap();
    let ct = dir.path().join("ct");
    let o = to_bf16_cli(&model, &ct);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(read_sorted(&ct.join("model.safetensors")) != reference);
    // A file naming only a key-value cache quantization (`quant_algo: null`) says nothing about
    // the weights; one without a `quantization` object is an error naming it.
    let dense = dir.path().join("dense-input");
    std::fs::create_dir(&dense).unwrap();
    std::fs::copy(
        out.join("model.safetensors"),
        dense.join("model.safetensors"),
    )
    .unwrap();
    std::fs::write(dense.join("config.json"), &config_text).unwrap();
    std::fs::write(
        dense.join("hf_quant_config.json"),
        r#"{"quantization": {"quant_algo": null, "kv_cache_quant_algo": "FP8"}}"#,
    )
    .unwrap();
    let o = convert_cli(&dense, dir.path().join("f16"), &["--dtype", "f16"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // One naming FP8 beside dense weights is a checkpoint that contradicts itself.
    std::fs::write(
        dense.join("hf_quant_config.json"),
        r#"{"quantization": {"quant_algo": "FP8"}}"#,
    )
    .unwrap();
    let o = convert_cli(&dense, dir.path().join("f16-1"), &["--dtype", "f16"]);
    assert!(
        o.code != 0
            && o.stderr.contains(
                "ModelOpt's hf_quant_config.json (config.json has no quantization_config) says \
                 `modelopt`, but no quantized weight"
            ),
        "{}",
        o.stderr
    );
    std::fs::write(dense.join("hf_quant_config.json"), r#"{"producer": {}}"#).unwrap();
    let o = convert_cli(&dense, dir.path().join("f16-2"), &["--dtype", "f16"]);
    assert!(
        o.code != 0
            && o.stderr.contains(
                "hf_quant_config.json has no `quantization` object: NVIDIA ModelOpt writes \
                 {\"quantization\": {\"quant_algo\": ..., \"exclude_modules\": [...]}}"
            ),
        "{}",
        o.stderr
    );
}

#[test]
fn modelopt_fp8_dequantizes_every_code_with_every_kind_of_scale_as_modelopt() {
    // ModelOpt 0.47's `FP8QTensor.dequantize` of all 256 float8 codes with finite, zero, tiny,
    // huge, infinite and NaN scales of either sign, into bfloat16, float16 and float32: its
    // NaN rules are torch's (bfloat16 arithmetic has one NaN; float16 and float32 keep an
    // element's; the 0-d scale converts by c10's scalar rules), and dtcast gives its bytes.
    let vectors = fixture("modelopt_fp8/dequantize.json");
    let scheme = Scheme::named("modelopt_fp8", DType::BFloat16).unwrap();
    // One row of the codes (the general path) and 64 (the one-pass forms, where this machine
    // has them): each row the reference's.
    let row: Vec<u8> = (0..=255).collect();
    let mut compared = 0;
    for case in vectors["cases"].as_array().unwrap() {
        let scale = hex(case["scale"].as_str().unwrap());
        let out: DType = case["out"].as_str().unwrap().parse().unwrap();
        let want = hex(case["hex"].as_str().unwrap());
        let size = out.byte_size().unwrap();
        for rows in [1, 64] {
            let codes = row.repeat(rows);
            let q = Quantized {
                elements: &codes,
                shape: &[rows, 256],
                scales: &scale,
                global_scale: None,
            };
            let got = dequantize(&q, &scheme, out).unwrap();
            assert_eq!(got.len(), rows * want.len());
            for (r, got) in got.chunks(want.len()).enumerate() {
                let first = (got.chunks(size).zip(want.chunks(size))).position(|(g, w)| g != w);
                assert_eq!(
                    first, None,
                    "scale {} into {out}, row {r} of {rows}: first differing code",
                    case["scale"]
                );
            }
        }
        compared += 1;
    }
    assert_eq!(compared, 30);
}
