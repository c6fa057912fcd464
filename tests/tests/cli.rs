//! The `dtcast` command line, run in-process through `dtcast::cli::run`.

use dtcast_tests::{dtcast_cli as dtcast, expected_dtype, rows, Expected};

#[test]
fn promote_prints_the_result_dtype() {
    let o = dtcast(&["promote", "int32[2]", "2.5"], "");
    assert_eq!((o.code, o.stdout.as_str()), (0, "float32\n"));
    let o = dtcast(&["promote", "uint8[2]", "int64[]"], "");
    assert_eq!(o.stdout, "uint8\n");
    let o = dtcast(
        &[
            "promote",
            "--default-dtype",
            "float64",
            "int32[2]",
            "(1+2j)",
        ],
        "",
    );
    assert_eq!(o.stdout, "complex128\n");
    let o = dtcast(&["promote", "int32[3]", "-1.5e3"], "");
    assert_eq!(o.stdout, "float32\n");
}

#[test]
fn policy_numpy_keeps_literal_values_and_casting_levels() {
    // Expected values: numpy 2.4.6 + ml_dtypes 0.7.0 (np.result_type and NEP 50's value errors, np.can_cast).
    let run = |args: &[&str]| dtcast(args, "");
    let np = |args: &[&str]| run(&[args, &["--policy", "numpy"]].concat());
    assert_eq!(np(&["promote", "uint8[2]", "3"]).stdout, "uint8\n");
    assert_eq!(np(&["promote", "uint8[2]", "255"]).stdout, "uint8\n");
    for (value, dtype) in [("300", "uint8"), ("-1", "uint8"), ("70000", "int16")] {
        let o = np(&["promote", &format!("{dtype}[2]"), value]);
        assert_eq!(
            (o.code, o.stderr.trim_end()),
            (
                1,
                format!("error: Python integer {value} out of bounds for {dtype}").as_str()
            )
        );
    }
    // The same literal is fine for torch and JAX (they wrap).
    assert_eq!(run(&["promote", "uint8[2]", "300"]).stdout, "uint8\n");
    // 0-dim arrays are arrays in NumPy.
    assert_eq!(
        np(&["promote", "float16[2]", "float64[]"]).stdout,
        "float64\n"
    );
    // ml_dtypes 0.7: int4 is an integer DType (a weak int keeps it), and bfloat16 ∨ float16
    // is float32; an ml_dtypes dtype with no common dtype is gone.
    assert_eq!(np(&["promote", "int4[2]", "3"]).stdout, "int4\n");
    assert_eq!(
        np(&["promote", "bfloat16[2]", "float16[2]"]).stdout,
        "float32\n"
    );
    let o = np(&["promote", "float4_e2m1fn_x2[2]", "float16[2]"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("float4_e2m1fn_x2"), "{}", o.stderr);
    for (from, to, casting, want) in [
        ("int64", "float64", "safe", "true"),
        ("float64", "float32", "safe", "false"),
        ("float64", "float32", "same_kind", "true"),
        ("float64", "int8", "same_kind", "false"),
        ("float64", "int8", "unsafe", "true"),
        // ml_dtypes 0.7 casts every pair; e8m0's range is not e4m3fn's, so not safely.
        ("float8_e8m0fnu", "float8_e4m3fn", "unsafe", "true"),
        ("float8_e8m0fnu", "float8_e4m3fn", "safe", "false"),
        ("float6_e2m3fn", "float8_e4m3fn", "safe", "true"),
        ("int8", "int8", "no", "true"),
    ] {
        let o = np(&["can-cast", from, to, "--casting", casting]);
        assert_eq!(
            o.stdout,
            format!("{want}\n"),
            "{from} -> {to} ({casting}): {}",
            o.stderr
        );
    }
    // Without --casting: what an operation may write to its output (NumPy: same_kind).
    assert_eq!(np(&["can-cast", "float64", "float16"]).stdout, "true\n");
    // torch's levels, read off its lattice.
    assert_eq!(
        run(&["can-cast", "int64", "int8", "--casting", "safe"]).stdout,
        "false\n"
    );
    let o = np(&["can-cast", "int8", "int16", "--casting", "same-kind"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("casting must be one of no, equiv, safe, same_kind, unsafe"),
        "{}",
        o.stderr
    );
    let o = np(&["can-cast", "float4_e2m1fn_x2", "int16"]);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (1, "error: float4_e2m1fn_x2 is not a NumPy dtype\n")
    );
    let o = np(&["promote", "int8[2]", "--default-dtype", "float16"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("NumPy's and the Array API's are float64"),
        "{}",
        o.stderr
    );
}

#[test]
fn policy_array_api_promotes_within_a_kind_and_names_the_rule() {
    // Expected values: array-api-strict 2.6.1 (fixtures/arrayapi/).
    let xp = |args: &[&str]| dtcast(&[args, &["--policy", "array-api"]].concat(), "");
    assert_eq!(xp(&["promote", "uint8[2]", "int8[]"]).stdout, "int16\n");
    assert_eq!(
        xp(&["promote", "float32[2]", "(1+2j)"]).stdout,
        "complex64\n"
    );
    let o = xp(&["promote", "int32[2]", "float32[2]"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("only within a kind"), "{}", o.stderr);
    let o = xp(&["promote", "int8[2]", "300"]);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (1, "error: Python integer 300 out of bounds for int8\n")
    );
    assert_eq!(xp(&["can-cast", "int8", "int64"]).stdout, "true\n");
    assert_eq!(xp(&["can-cast", "int8", "float64"]).stdout, "false\n");
    let o = xp(&["promote", "float16[2]", "float32[2]"]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("float16 is not an Array API dtype"),
        "{}",
        o.stderr
    );
    let table = xp(&["table"]);
    assert!(table.stdout.contains("| **uint64** |"), "{}", table.stdout);
    assert!(!table.stdout.contains("bfloat16"), "{}", table.stdout);
}

#[test]
fn policy_jax_promotes_with_weak_scalars() {
    // Expected values: jax 0.10.2 (fixtures/policies/jax_result_type.json and jax_lattice.json).
    let run = |args: &[&str]| dtcast(args, "");
    assert_eq!(
        run(&["promote", "int8[2]", "3", "--policy", "jax"]).stdout,
        "int8\n"
    );
    assert_eq!(
        run(&["promote", "uint8[2]", "300", "--policy", "jax"]).stdout,
        "uint8\n"
    );
    assert_eq!(
        run(&["promote", "int8[2]", "2.5", "--policy", "jax"]).stdout,
        "float64\n"
    );
    assert_eq!(
        run(&["promote", "int64[2]", "2.5", "--policy", "jax-no-x64"]).stdout,
        "float32\n"
    );
    // torch's 0-dim precedence does not exist in JAX.
    assert_eq!(
        run(&["promote", "float16[2]", "float64[]", "--policy", "jax"]).stdout,
        "float64\n"
    );
    assert_eq!(
        run(&["promote", "float16[2]", "float64[]"]).stdout,
        "float16\n"
    );
    let o = run(&[
        "promote",
        "--policy",
        "jax",
        "float16[2]",
        "float8_e4m3fn[2]",
    ]);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("no available implicit dtype promotion path"),
        "{}",
        o.stderr
    );
    assert_eq!(
        run(&["can-cast", "int8", "float16", "--policy", "jax"]).stdout,
        "true\n"
    );
    assert_eq!(
        run(&["can-cast", "float16", "bfloat16", "--policy", "jax"]).stdout,
        "false\n"
    );
    let o = run(&["can-cast", "complex32", "float16", "--policy", "jax"]);
    assert_eq!(
        (o.code, o.stderr.as_str()),
        (1, "error: complex32 is not a JAX dtype\n")
    );
    let o = run(&[
        "promote",
        "int8[2]",
        "--policy",
        "jax",
        "--default-dtype",
        "float16",
    ]);
    assert!(
        o.code == 1 && o.stderr.contains("--default-dtype is torch's"),
        "{}",
        o.stderr
    );
    // The table has JAX's dtypes: float6 yes, complex32 no.
    let table = run(&["table", "--policy", "jax"]).stdout;
    let header = table.lines().next().unwrap();
    assert!(
        header.contains(" float6_e2m3fn |") && !header.contains("complex32"),
        "{header}"
    );
    assert!(table.contains("| **int64** |"), "{table}");
}

#[test]
fn promote_errors_exit_1_with_torch_message() {
    let o = dtcast(&["promote", "uint16[2]", "int32[2]"], "");
    assert_eq!(o.code, 1);
    assert_eq!(o.stdout, "");
    assert!(
        o.stderr
            .starts_with("error: Promotion for uint16, uint32, uint64 types is not supported"),
        "{}",
        o.stderr
    );
}

#[test]
fn bad_operands_and_dtypes_are_usage_errors() {
    let o = dtcast(&["promote", "int8[2", "3"], "");
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.starts_with("error:") && o.stderr.contains("must end with `]`"),
        "{}",
        o.stderr
    );
    let o = dtcast(&["can-cast", "float65", "int8"], "");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("did you mean `float64`?"), "{}", o.stderr);
    let o = dtcast(&["promote", "--default-dtype", "int32", "1.0"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.starts_with("error: only floating-point types"),
        "{}",
        o.stderr
    );
    let o = dtcast(&["no-such-command"], "");
    assert_eq!(o.code, 2);
}

#[test]
fn promote_batch_mode_answers_every_fixture_case_in_order() {
    // Two-operand rows of torch_result_type.json (the three-operand rows are torch.clamp, whose
    // Scalar overload is not result_type), twice over: about 4,200 lines.
    let cases: Vec<_> = rows("torch_result_type.json")
        .into_iter()
        .filter(|r| r[0].as_array().is_some_and(|ops| ops.len() == 2))
        .collect();
    let mut input = String::new();
    for r in cases.iter().chain(&cases) {
        let ops: Vec<&str> = r[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap())
            .collect();
        input.push_str(&ops.join(" "));
        input.push('\n');
    }
    input.push_str("nonsense\n\nint8[2] int16[]\n");
    let o = dtcast(&["promote"], &input);
    // Every line is answered; the status says that some failed.
    let failing = cases
        .iter()
        .filter(|r| matches!(expected_dtype(&r[1]), Expected::Err(_)))
        .count();
    assert!(failing > 0);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!(
            "error: {} of {} cases failed\n",
            2 * failing + 2,
            2 * cases.len() + 3
        )
    );
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2 * cases.len() + 3);
    for (r, line) in cases.iter().chain(&cases).zip(&lines) {
        match expected_dtype(&r[1]) {
            Expected::Ok(dt) => assert_eq!(*line, dt.name(), "{}", r[0]),
            Expected::Err(_) => assert!(line.starts_with("error: "), "{}: {line}", r[0]),
        }
    }
    let tail = &lines[2 * cases.len()..];
    assert!(tail[0].starts_with("error: invalid operand `nonsense`"));
    assert!(tail[1].starts_with("error: empty case"));
    assert_eq!(tail[2], "int8");
}

#[test]
fn can_cast_prints_true_or_false() {
    assert_eq!(
        dtcast(&["can-cast", "int32", "float16"], "").stdout,
        "true\n"
    );
    assert_eq!(
        dtcast(&["can-cast", "float32", "int64"], "").stdout,
        "false\n"
    );
    assert_eq!(
        dtcast(&["can-cast", "complex64", "float64"], "").stdout,
        "false\n"
    );
}

#[test]
fn table_agrees_with_torch_promote_types() {
    let o = dtcast(&["table"], "");
    assert_eq!(o.code, 0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    let cells = |line: &str| -> Vec<String> {
        line.trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('*').to_owned())
            .collect()
    };
    let header = cells(lines[0]);
    let mut table = std::collections::HashMap::new();
    for line in &lines[2..] {
        if !line.starts_with('|') {
            break;
        }
        let row = cells(line);
        for (col, cell) in header.iter().zip(&row).skip(1) {
            table.insert((row[0].clone(), col.clone()), cell.clone());
        }
    }
    // torch's 29 dtypes: its 22 with casts and its 7 storage-only ones.
    assert_eq!(table.len(), 29 * 29);
    for r in rows("torch_promote_types.json") {
        let key = (
            r[0].as_str().unwrap().to_owned(),
            r[1].as_str().unwrap().to_owned(),
        );
        let cell = &table[&key];
        match expected_dtype(&r[2]) {
            Expected::Ok(dt) => assert_eq!(cell, dt.name(), "{key:?}"),
            Expected::Err(_) => assert_eq!(cell, "error", "{key:?}"),
        }
    }
}

#[test]
fn bitcast_prints_the_new_shape() {
    let o = dtcast(
        &[
            "bitcast", "--from", "float32", "--to", "uint8", "--shape", "2,3,4",
        ],
        "",
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "[2, 3, 16]\n"));
    let o = dtcast(
        &[
            "bitcast", "--from", "float32", "--to", "uint8", "--shape", "2,3,4", "--rule", "xla",
        ],
        "",
    );
    assert_eq!(o.stdout, "[2, 3, 4, 4]\n");
    let o = dtcast(
        &[
            "bitcast", "--from", "int32", "--to", "float32", "--shape", "",
        ],
        "",
    );
    assert_eq!(o.stdout, "[]\n");
    let o = dtcast(
        &[
            "bitcast", "--from", "uint8", "--to", "float32", "--shape", "", "--rule", "xla",
        ],
        "",
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with("error: xla rule:"), "{}", o.stderr);
    let o = dtcast(
        &[
            "bitcast", "--from", "float32", "--to", "float64", "--shape", "2,3",
        ],
        "",
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("self.size(-1) must be divisible by 2"),
        "{}",
        o.stderr
    );
    let o = dtcast(
        &[
            "bitcast", "--from", "float32", "--to", "float64", "--shape", "2,x",
        ],
        "",
    );
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("`x` is not a dimension"), "{}", o.stderr);
}

#[test]
fn cast_converts_hex_elements_like_torch() {
    // float32 [1.0, 2.5, -3.0, 300.0] -> uint8 as torch: [1, 2, 253, 44].
    let o = dtcast(
        &["cast", "--from", "float32", "--to", "uint8", "--hex"],
        "0000803f 00002040\n000040c0 00009643\n",
    );
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (0, "01 02 fd 2c\n"),
        "{}",
        o.stderr
    );
    let o = dtcast(
        &[
            "cast", "--from", "f32", "--to", "u8", "--hex", "--mode", "saturate",
        ],
        "000040c0 00009643",
    );
    assert_eq!(o.stdout, "00 ff\n");
    let o = dtcast(
        &[
            "cast", "--from", "f32", "--to", "u8", "--hex", "--mode", "checked",
        ],
        "0000803f 000040c0",
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "error: element 1 (-3.0) is out of range for uint8\n"
    );
    assert_eq!(o.stdout, "");
}

#[test]
fn cast_rejects_partial_elements_and_bad_tokens() {
    let o = dtcast(&["cast", "--from", "float32", "--to", "uint8"], "abcde");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("5 bytes is not a whole number of float32 elements"),
        "{}",
        o.stderr
    );
    let o = dtcast(
        &["cast", "--from", "float32", "--to", "uint8", "--hex"],
        "0000803f 00",
    );
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("--hex token 1 (`00`) is not one float32 element: expected 8 hex digits"),
        "{}",
        o.stderr
    );
    let o = dtcast(
        &[
            "cast", "--from", "float32", "--to", "uint8", "--mode", "wrap",
        ],
        "",
    );
    assert_eq!(o.code, 2);
    assert!(
        o.stderr
            .contains("[possible values: torch, saturate, checked, exact]"),
        "{}",
        o.stderr
    );
    // Mode names are case-insensitive.
    let o = dtcast(
        &[
            "cast", "--from", "float32", "--to", "uint8", "--mode", "Checked", "--hex",
        ],
        "0000803f",
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "01\n"), "{}", o.stderr);
}

#[test]
fn cast_writes_files_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    std::fs::write(&input, [0u8, 0, 0x80, 0x3F, 0, 0, 0xC0, 0x7F]).unwrap(); // 1.0, NaN
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());
    let r = dtcast(
        &["cast", "--from", "float32", "--to", "bfloat16", i, "-o", o],
        "",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(&output).unwrap(), [0x80, 0x3F, 0xFF, 0xFF]); // torch's NaN is 0xFFFF
                                                                           // A failing cast leaves the existing output as it was and no temporary file behind.
    let r = dtcast(
        &[
            "cast", "--from", "float32", "--to", "int32", "--mode", "checked", i, "-o", o,
        ],
        "",
    );
    assert_eq!(r.code, 1);
    assert_eq!(std::fs::read(&output).unwrap(), [0x80, 0x3F, 0xFF, 0xFF]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    let r = dtcast(
        &[
            "cast",
            "--from",
            "float32",
            "--to",
            "int32",
            "/no/such/file",
        ],
        "",
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("error: reading /no/such/file"),
        "{}",
        r.stderr
    );
}

#[test]
fn bench_on_a_cuda_device_reports_the_cpu_bench_keys_or_says_why_it_cannot() {
    let o = dtcast(
        &[
            "bench",
            "--device",
            "cuda:0",
            "--elements",
            "4096",
            "--repeat",
            "1",
            "--pairs",
            "f32:bf16,u8:f32",
            "--json",
        ],
        "",
    );
    if !dtcast::device::cuda_available() {
        assert_eq!(o.code, 1);
        assert!(
            o.stderr.starts_with("error: CUDA is not available: "),
            "{}",
            o.stderr
        );
    } else {
        assert_eq!(o.code, 0, "{}", o.stderr);
        let lines: Vec<&str> = o.stdout.lines().collect();
        assert_eq!(lines.len(), 2);
        for line in lines {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["device"], "cuda:0");
            assert_eq!(v["elements"], 4096);
            for key in ["gelem_per_s", "cast_gbps", "memcpy_gbps", "to_gbps"] {
                assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {line}");
            }
        }
    }
    // CPU-only options with a CUDA device, and transfers without one, are refused up front.
    let o = dtcast(&["bench", "--device", "cuda:0", "--threads", "2"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("--backend, --threads, --alloc and --scratch choose CPU paths"),
        "{}",
        o.stderr
    );
    let o = dtcast(&["bench", "--transfers"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("it needs --device cuda:N"),
        "{}",
        o.stderr
    );
}

#[test]
fn bench_reports_json_lines_for_the_requested_pairs() {
    let o = dtcast(
        &[
            "bench",
            "--elements",
            "4096",
            "--repeat",
            "1",
            "--threads",
            "1",
            "--pairs",
            "f32:bf16,u8:f32",
            "--json",
        ],
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    for (line, (from, to)) in lines
        .iter()
        .zip([("float32", "bfloat16"), ("uint8", "float32")])
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["from"], from);
        assert_eq!(v["to"], to);
        assert_eq!(v["elements"], 4096);
        assert_eq!(v["threads"], 1);
        for key in ["gelem_per_s", "cast_gbps", "memcpy_gbps", "ratio"] {
            assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key} in {line}");
        }
        // The only variant, against itself in every round.
        assert_eq!(v["versus_first"], 1.0, "{line}");
    }
    let o = dtcast(&["bench", "--pairs", "f32-bf16"], "");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("expected FROM:TO"), "{}", o.stderr);
}

#[test]
fn bench_runs_every_mode_on_values_the_destination_holds() {
    // Checked and Exact runs measure the check: their sample data must pass it, for narrowing
    // pairs, float8, e8m0 (powers of two only) and bool alike.
    for mode in ["torch", "saturate", "checked", "exact"] {
        let o = dtcast(
            &[
                "bench",
                "--elements",
                "4096",
                "--repeat",
                "1",
                "--threads",
                "1",
                "--mode",
                mode,
                "--pairs",
                "f32:bf16,f64:f8e4m3fn,f32:f8e8m0fnu,f64:bool,bool:f16,i64:u8",
                "--json",
            ],
            "",
        );
        assert_eq!(o.code, 0, "--mode {mode}: {}", o.stderr);
        assert_eq!(o.stdout.lines().count(), 6, "--mode {mode}");
    }
    // Every hot pair (the default list: float4/float6 hold at most 6 and 7.5, float8_e3m4 15.5,
    // int4 7), and the narrowest integers (int1 holds 0 and -1, uint1 and int2 at most 1).
    let narrow = "float32:int1,float32:uint1,float64:int2,float16:uint2,float6_e2m3fn:int4";
    for (pairs, lines) in [(None, dtcast::cast::hot_pairs().len()), (Some(narrow), 5)] {
        for mode in ["checked", "exact"] {
            let mut args = vec![
                "bench",
                "--elements",
                "1024",
                "--repeat",
                "1",
                "--threads",
                "1",
            ];
            args.extend(["--mode", mode, "--json"]);
            if let Some(pairs) = pairs {
                args.extend(["--pairs", pairs]);
            }
            let o = dtcast(&args, "");
            assert_eq!(o.code, 0, "--mode {mode}, {pairs:?}: {}", o.stderr);
            assert_eq!(o.stdout.lines().count(), lines, "--mode {mode}, {pairs:?}");
        }
    }
}

#[test]
fn device_prints_torchs_device_string_or_an_error() {
    // As torch.device(s) prints: the index kept as written (none on `cuda`, one on `cpu:0`).
    assert_eq!(dtcast(&["device", "cuda"], "").stdout, "cuda\n");
    assert_eq!(dtcast(&["device", "gpu:3"], "").stdout, "cuda:3\n");
    assert_eq!(dtcast(&["device", "gpu"], "").stdout, "cuda\n");
    assert_eq!(dtcast(&["device", "cpu:0"], "").stdout, "cpu:0\n");
    assert_eq!(dtcast(&["device", "cpu"], "").stdout, "cpu\n");
    let o = dtcast(&["device", "cuda:01"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .starts_with("error: Invalid device string: 'cuda:01'"),
        "{}",
        o.stderr
    );
    let o = dtcast(&["device", "mps"], "");
    assert!(o.stderr.contains("not supported by dtcast"), "{}", o.stderr);
}

#[test]
fn devices_lists_the_cpu_first() {
    let o = dtcast(&["devices"], "");
    assert_eq!(o.code, 0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines[0], "cpu");
    let gpus = dtcast::device::cuda_device_count();
    if gpus == 0 {
        // Without a GPU, one line says why.
        assert_eq!(lines.len(), 2);
        assert!(
            lines[1].starts_with("cuda: not available ("),
            "{}",
            lines[1]
        );
    } else {
        assert_eq!(lines.len(), 1 + gpus);
        assert!(lines[1..].iter().all(|l| l.starts_with("cuda:")));
    }
}

#[test]
fn inspect_and_convert_the_example_checkpoint() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/tiny.safetensors");
    let o = dtcast(&["inspect", example], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("blocks.1.steps   int64          [1]"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("float32             7 tensors             6280 bytes"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("metadata format = pt"), "{}", o.stdout);

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bf16.safetensors");
    let out_s = out.to_str().unwrap();
    let o = dtcast(
        &[
            "convert", example, "-o", out_s, "--dtype", "bf16", "--keep", "*.scale",
        ],
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Five float32 tensors halve (6,272 -> 3,136 bytes); position_ids, steps and the scales stay (280).
    assert!(
        o.stdout
            .starts_with("converted 5 tensors to bfloat16, kept 5; 6552 -> 3416 bytes"),
        "{}",
        o.stdout
    );
    let o = dtcast(&["convert", example, "-o", out_s, "--dtype", "bf16"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("exists; pass --force to replace it"),
        "{}",
        o.stderr
    );
    let o = dtcast(
        &[
            "convert", example, "-o", out_s, "--dtype", "bf16", "--force", "--device", "cuda:0",
        ],
        "",
    );
    if !dtcast::device::cuda_available() {
        assert_eq!(o.code, 1);
        assert!(o.stderr.contains("CUDA is not available"), "{}", o.stderr);
    }
    let o = dtcast(&["inspect", "/no/such.safetensors"], "");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .starts_with("error: /no/such.safetensors: No such file"),
        "{}",
        o.stderr
    );
}

#[test]
fn keep_takes_one_pattern_per_flag_or_a_comma_list_and_each_must_match() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/tiny.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.safetensors");
    let out_s = out.to_str().unwrap();
    // The input after --keep is the positional input, not a second pattern.
    let o = dtcast(
        &[
            "convert", "--keep", "embed", example, "-o", out_s, "--dtype", "f16",
        ],
        "",
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .starts_with("converted 6 tensors to float16, kept 4"),
        "{}",
        o.stdout
    );
    let o = dtcast(
        &[
            "convert",
            example,
            "-o",
            out_s,
            "--dtype",
            "f16",
            "--force",
            "--keep",
            "embed,*.bias",
            "--keep",
            "*.scale",
        ],
        "",
    );
    assert!(
        o.stdout
            .starts_with("converted 2 tensors to float16, kept 8"),
        "{}",
        o.stdout
    );
    // A pattern that matches nothing is an error naming the closest tensors; nothing is written.
    std::fs::remove_file(&out).unwrap();
    let o = dtcast(
        &[
            "convert",
            example,
            "-o",
            out_s,
            "--dtype",
            "f16",
            "--keep",
            "blocks.0.wieght",
        ],
        "",
    );
    assert_eq!(o.code, 1);
    assert_eq!(
        o.stderr,
        "error: --keep `blocks.0.wieght` matches no tensor of the checkpoint; the closest names are `blocks.0.weight`, `blocks.1.weight`, `blocks.0.bias`\n"
    );
    assert!(!out.exists());
}

#[test]
fn dtype_flags_take_safetensors_names_and_suggest_sensibly() {
    let o = dtcast(
        &["cast", "--from", "F32", "--to", "BF16", "--hex"],
        "0000803f",
    );
    assert_eq!((o.code, o.stdout.as_str()), (0, "803f\n"), "{}", o.stderr);
    let o = dtcast(
        &["cast", "--from", "f32", "--to", "F8_E4M3", "--hex"],
        "0000803f",
    );
    assert_eq!(o.stdout, "38\n");
    let o = dtcast(&["convert", "x", "-o", "y", "--dtype", "float8"], "");
    assert_eq!(o.code, 2);
    let first = o.stderr.lines().next().unwrap();
    assert_eq!(
        first,
        "error: invalid value 'float8' for '--dtype <DT>': unknown dtype `float8`; did you mean one of `float8_e4m3fn`, `float8_e5m2`, `float8_e4m3fnuz`, `float8_e5m2fnuz`, `float8_e8m0fnu`, `float8_e4m3`? (`dtcast dtypes` lists every name)"
    );
    let o = dtcast(&["can-cast", "flaot32", "int8"], "");
    assert!(o.stderr.contains("did you mean `float32`?"), "{}", o.stderr);
}

#[test]
fn dtypes_lists_every_dtype_from_the_table() {
    let o = dtcast(&["dtypes"], "");
    assert_eq!(o.code, 0);
    for dt in dtcast::DType::ALL {
        assert!(
            o.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{} ", dt.name()))),
            "{dt}"
        );
    }
    assert!(
        o.stdout
            .contains("bfloat16             16  floating point    e8m7 bias 127"),
        "{}",
        o.stdout
    );
    // Maxima compactly: float64's is 1.797693e308 (not its 309 digits); small ones exactly.
    assert!(
        o.stdout.contains("e11m52 bias 1023 max 1.797693e308 "),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("e5m3 bias 15 max 114688 "),
        "{}",
        o.stdout
    );
    let o = dtcast(&["dtypes", "--json"], "");
    let rows: Vec<serde_json::Value> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), dtcast::DType::COUNT);
    let e4m3 = rows.iter().find(|r| r["name"] == "float8_e4m3fn").unwrap();
    // Independent facts of the format (OCP FP8 E4M3: bias 7, largest finite 448).
    assert_eq!(e4m3["bits"], 8);
    assert_eq!(e4m3["safetensors"], "F8_E4M3");
    assert_eq!(e4m3["float_format"]["exponent_bits"], 4);
    assert_eq!(e4m3["float_format"]["mantissa_bits"], 3);
    assert_eq!(e4m3["float_format"]["bias"], 7);
    assert_eq!(e4m3["float_format"]["max"], 448.0);
    let c128 = rows.iter().find(|r| r["name"] == "complex128").unwrap();
    assert_eq!(c128["safetensors"], serde_json::Value::Null);
    assert_eq!(c128["aliases"], serde_json::json!(["cdouble", "c128"]));
}

#[test]
fn usage_errors_exit_2_and_bad_tokens_are_quoted_short() {
    assert_eq!(dtcast(&["bench", "--threads", "0"], "").code, 2);
    assert_eq!(
        dtcast(
            &["convert", "a", "-o", "b", "--dtype", "f16", "--mode", "wrap"],
            ""
        )
        .code,
        2
    );
    let huge = "z".repeat(2 << 20);
    let o = dtcast(&["cast", "--from", "f32", "--to", "f16", "--hex"], &huge);
    assert_eq!(o.code, 1);
    assert!(o.stderr.len() < 250, "{} bytes", o.stderr.len());
    assert!(
        o.stderr
            .contains(&format!("`{}… (2097152 characters)`", "z".repeat(40))),
        "{}",
        o.stderr
    );
}

#[test]
fn inspect_shows_a_sharded_checkpoint_per_shard_and_in_total() {
    let dir = tempfile::tempdir().unwrap();
    let index = dtcast_tests::write_sharded(
        dir.path(),
        &[
            vec![("a", vec![1.0; 3]), ("b", vec![2.0; 2])],
            vec![("c", vec![3.0; 5])],
        ],
    );
    let o = dtcast(&["inspect", index.to_str().unwrap()], "");
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("shard model-00001-of-00002.safetensors: 2 tensors, 20 bytes"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("shard model-00002-of-00002.safetensors: 1 tensors, 20 bytes"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("total               3 tensors               40 bytes in 2 shards"),
        "{}",
        o.stdout
    );
}

#[test]
fn hex_tokens_of_packed_dtypes_are_one_element_each() {
    // float4 6.0 is code 7 (formats.json); raw bytes are packed, low nibble first.
    let o = dtcast(
        &["cast", "--from", "f32", "--to", "float4_e2m1fn", "--hex"],
        "0000803f 0000c040 0000003f 000000c0",
    );
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (0, "2 7 1 c\n"),
        "{}",
        o.stderr
    );
    let o = dtcast(&["cast", "--from", "f4e2m1", "--to", "f32", "--hex"], "2 7");
    assert_eq!(o.stdout, "0000803f 0000c040\n");
    // float6: a code of 6 bits, at most 3f; 40 does not fit.
    let o = dtcast(
        &["cast", "--from", "float6_e2m3fn", "--to", "f32", "--hex"],
        "40 0 0 0",
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("--hex token 0 (`40`) is not one float6_e2m3fn element: expected a code of 6 bits, 0 to 3f in hex"), "{}", o.stderr);
    // The tokens are elements: any number of them, nothing packed (three int4 end inside a
    // byte; as tokens they are three elements). int4 7, -8, -1.
    let o = dtcast(&["cast", "--from", "int4", "--to", "f32", "--hex"], "7 8 f");
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (0, "0000e040 000000c1 000080bf\n"),
        "{}",
        o.stderr
    );
    // Into a packed dtype too: one float32 1.0 is float4 code 2.
    let o = dtcast(
        &["cast", "--from", "f32", "--to", "f4e2m1", "--hex"],
        "0000803f",
    );
    assert_eq!(o.stdout, "2\n");
    // Leading zeros: `07` is float4 code 7 (6.0), `0008` code 8 (-0.0).
    let o = dtcast(
        &["cast", "--from", "f4e2m1", "--to", "f32", "--hex"],
        "07 0008",
    );
    assert_eq!(o.stdout, "0000c040 00000080\n");
    let o = dtcast(&["cast", "--from", "int4", "--to", "f32", "--hex"], "010");
    assert_eq!(o.code, 1);
    assert!(
        o.stderr
            .contains("expected a code of 4 bits, 0 to f in hex"),
        "{}",
        o.stderr
    );
    // An error names the element it is about, not a padding copy: int4 -> uint4 Checked fails
    // at -1 (element 1), and at element 0 when that is the bad one.
    let o = dtcast(
        &[
            "cast", "--from", "int4", "--to", "uint4", "--hex", "--mode", "checked",
        ],
        "1 f 2",
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("element 1"), "{}", o.stderr);
    let o = dtcast(&["cast", "--from", "int4", "--to", "f32", "--hex"], "7 8");
    assert_eq!(o.stdout, "0000e040 000000c1\n"); // 7, -8
}

#[test]
fn table_dot_is_the_hasse_diagram_of_each_policy() {
    use dtcast::promote::{Jax, NumPy};
    use dtcast::{DType, Policy, Torch};
    use std::collections::BTreeSet;
    let policies: [(&str, Box<dyn Policy>); 4] = [
        ("torch", Box::new(Torch::default())),
        ("jax", Box::new(Jax::default())),
        ("numpy", Box::new(NumPy)),
        ("array-api", Box::new(dtcast::promote::ArrayApi)),
    ];
    for (name, policy) in policies {
        let o = dtcast(&["table", "--format", "dot", "--policy", name], "");
        assert_eq!(o.code, 0, "{}", o.stderr);
        let edges: BTreeSet<(String, String)> = o
            .stdout
            .lines()
            .filter_map(|l| l.trim().strip_suffix(';')?.split_once(" -> "))
            .map(|(a, b)| {
                (
                    a.trim_matches('"').to_owned(),
                    b.trim_matches('"').to_owned(),
                )
            })
            .collect();
        // The covering relation, computed here from promote_types: a < b when b is their join.
        let dtypes: Vec<DType> = DType::ALL
            .into_iter()
            .filter(|&d| policy.has_dtype(d))
            .collect();
        let lt = |a: DType, b: DType| a != b && policy.promote_types(a, b) == Ok(b);
        let mut want = BTreeSet::new();
        for &a in &dtypes {
            for &b in &dtypes {
                let between = dtypes.iter().any(|&c| lt(a, c) && lt(c, b));
                if lt(a, b) && !between {
                    want.insert((a.to_string(), b.to_string()));
                }
            }
        }
        assert_eq!(edges, want, "{name}");
        // Every dtype of the policy is a node once, in its category's row.
        let rows: Vec<&str> = o
            .stdout
            .lines()
            .filter(|l| l.trim().starts_with("{ rank=same;"))
            .collect();
        for d in &dtypes {
            let quoted = format!("\"{d}\"");
            let count: usize = rows.iter().map(|r| r.matches(&quoted).count()).sum();
            assert_eq!(count, 1, "{name}: {d}");
        }
        let has = |a: &str, b: &str| edges.contains(&(a.to_owned(), b.to_owned()));
        // Known covers (independent reasoning), and no transitive shortcut.
        assert!(has("int8", "int16") && has("uint8", "int16") && has("float32", "float64"));
        // (The Array API standard has neither bfloat16 nor float16.)
        if policy.has_dtype(DType::BFloat16) {
            assert!(has("bfloat16", "float32") && has("float16", "float32"));
        }
        assert!(!has("int8", "int32") && !has("float16", "float64"));
    }
}

#[test]
fn the_committed_lattice_pictures_are_what_table_svg_draws() {
    use dtcast::promote::{Jax, NumPy};
    use dtcast::{DType, Policy, Torch};
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/lattices");
    let policies: [(&str, Box<dyn Policy>); 4] = [
        ("torch", Box::new(Torch::default())),
        ("jax", Box::new(Jax::default())),
        ("numpy", Box::new(NumPy)),
        ("array-api", Box::new(dtcast::promote::ArrayApi)),
    ];
    for (name, policy) in policies {
        let o = dtcast(&["table", "--format", "svg", "--policy", name], "");
        assert_eq!(o.code, 0, "{}", o.stderr);
        let path = docs.join(format!("{name}.svg"));
        let committed = std::fs::read_to_string(&path).expect("the committed SVG");
        assert!(
            o.stdout == committed,
            "{} is stale: regenerate it with `dtcast table --format svg --policy {name} > docs/lattices/{name}.svg`",
            path.display()
        );
        // Well-formed XML whose text is every dtype of the policy, once.
        let doc = roxmltree::Document::parse(&o.stdout).expect("the SVG parses as XML");
        let labels: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text") && n.attribute("class") == Some("dtype"))
            .filter_map(|n| n.text())
            .collect();
        let mut want: Vec<String> = DType::ALL
            .into_iter()
            .filter(|&d| policy.has_dtype(d))
            .map(|d| d.to_string())
            .collect();
        let mut got: Vec<String> = labels.iter().map(|s| s.to_string()).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "{name}");
    }
}
