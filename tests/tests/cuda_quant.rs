//! The scaled-format CUDA kernels (`device/src/cuda/scaled.cu`) give dtcast-quant's CPU bytes.
//!
//! The law CPU == CUDA, checked two ways:
//! - `scaled.cu` compiled as plain C++ on the host (any machine with a C++ compiler) runs the
//!   per-element functions the GPU threads run, fed the plans dtcast-quant computes (what the
//!   CUDA launcher does), for every scheme, input dtype, output dtype, shapes with partial blocks
//!   and inputs full of NaN, inf, -0, subnormals and rounding ties;
//! - on a machine with a GPU, the kernels themselves through `dtcast::device::cuda::{quantize,
//!   dequantize}` (skipped, visibly, elsewhere); and NVRTC compiles every program where it is
//!   installed.

use dtcast::device::cuda;
use dtcast::device::cuda_available;
use dtcast::quant::{
    dequantize, quantize, scale_layout, DequantPlan, Granularity, Quantized, Quantizer, Scheme,
};
use dtcast::{DType, Tensor};
use dtcast_tests::cuda_host::{compile_cpp, quirk_bits, run_harness, Build};

/// A xorshift stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 11) % n
    }
}

/// Every scheme the references name, for each input dtype it is named for (float16 where the
/// reference quantizes it: compressed-tensors'); and the same rules over layouts no reference
/// uses (blocks that are not square, groups of 8), so that the kernels' scale indexing is held
/// to the CPU's for any granularity.
fn schemes() -> Vec<(&'static str, DType, Scheme)> {
    let mut all = Vec::new();
    for &name in Scheme::NAMES {
        for dtype in [DType::Float32, DType::BFloat16, DType::Float16] {
            let scheme = Scheme::named(name, dtype).unwrap();
            if scheme.check_input(dtype).is_ok() {
                all.push((name, dtype, scheme));
            }
        }
    }
    for dtype in [DType::Float32, DType::BFloat16, DType::Float16] {
        let block = Scheme::named("ct_fp8_block", dtype).unwrap();
        all.push((
            "ct_fp8 in 4x8 blocks",
            dtype,
            Scheme {
                granularity: Granularity::Block(4, 8),
                ..block
            },
        ));
        all.push((
            "ct_fp8 in 8x2 blocks",
            dtype,
            Scheme {
                granularity: Granularity::Block(8, 2),
                ..block
            },
        ));
        for (name, label) in [
            ("ao_mxfp4_even", "ao_mxfp4_even in groups of 8"),
            ("ct_mxfp4", "ct_mxfp4 in groups of 8"),
        ] {
            let mx = Scheme::named(name, dtype).unwrap();
            if mx.check_input(dtype).is_ok() {
                all.push((
                    label,
                    dtype,
                    Scheme {
                        granularity: Granularity::Group(8),
                        ..mx
                    },
                ));
            }
        }
    }
    all
}

/// Shapes for a scheme: odd row counts, several groups, a partial 2-D block, and no rows.
fn shapes(scheme: &Scheme) -> Vec<Vec<usize>> {
    match scheme.granularity {
        Granularity::Group(k) => vec![vec![1, k], vec![3, 2 * k], vec![5, 3 * k], vec![0, k]],
        Granularity::Block(br, bc) => vec![vec![br + 2, bc + 32], vec![1, 2], vec![0, 4]],
        Granularity::Tensor | Granularity::Channel => vec![vec![3, 10], vec![7, 34], vec![0, 2]],
    }
}

/// Input values of one kind (0: weights; 1: every float32 bit pattern at random; 2: weights with
/// inf, NaN (of both signs, with payloads), -0 and subnormals sprinkled in; 3: values on float4's
/// and float8's rounding ties at many scales; 4: groups of zeros and tiny values). No input makes a bfloat16 rounding tie
/// after compressed-tensors' division: the quotient of two 8-bit significands is never within
/// 2^-24 of a midpoint of 8 bits, so the ties rule of that rounding is not observable.
fn values(kind: usize, n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let r = rng.next();
            let weight = f32::from_bits(0x3C00_0000 + (r as u32 % 0x0400_0000))
                * if r >> 63 == 1 { -1.0 } else { 1.0 };
            match kind {
                0 => weight,
                1 => f32::from_bits((r >> 16) as u32),
                2 => match rng.below(12) {
                    0 => f32::INFINITY,
                    1 => f32::NEG_INFINITY,
                    2 => f32::from_bits(0x7FC0_0000 | (r as u32 & 0xFFFF)),
                    3 => f32::from_bits(0xFFA0_0001),
                    4 => -0.0,
                    5 => f32::from_bits(r as u32 & 0x007F_FFFF),
                    _ => weight,
                },
                3 => {
                    let ties = [
                        0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 1.0625, 1.1875, 0.0078125,
                    ];
                    let e = rng.below(40) as i32 - 20;
                    ties[rng.below(ties.len() as u64) as usize]
                        * 2f32.powi(e)
                        * if r & 1 == 1 { -1.0 } else { 1.0 }
                }
                _ => {
                    if (i / 16) % 2 == 0 {
                        0.0
                    } else {
                        f32::from_bits(r as u32 & 0x00FF_FFFF)
                    }
                }
            }
        })
        .collect()
}

/// Values stored as `dtype` (bfloat16: the top half of the float32, NaN bits kept; float16: the
/// float32 cast to it, torch's rounding).
fn stored(values: &[f32], dtype: DType) -> Vec<u8> {
    let words: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    if dtype == DType::BFloat16 {
        values
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    } else if dtype == DType::Float16 {
        let mut halves = vec![0u8; 2 * values.len()];
        dtcast::cast(
            &words,
            DType::Float32,
            &mut halves,
            DType::Float16,
            dtcast::CastMode::Torch,
        )
        .unwrap();
        halves
    } else {
        words
    }
}

fn put_bytes(job: &mut Vec<u8>, bytes: &[u8]) {
    job.extend((bytes.len() as u64).to_le_bytes());
    job.extend(bytes);
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The layout words every job carries: kind, a, b, rows, cols.
fn put_layout(job: &mut Vec<u8>, scheme: &Scheme, rows: usize, cols: usize) {
    let (kind, a, b) = scale_layout(scheme.granularity);
    job.extend(kind.to_le_bytes());
    for w in [a, b, rows, cols] {
        job.extend((w as u64).to_le_bytes());
    }
}

/// The harness, compiled; `None` (with a SKIPPED note from the compiler search) without a C++
/// compiler.
fn harness(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let exe = dir.join("scaled_harness");
    compile_cpp(
        &root.join("tests/cuda_host/scaled_harness.cpp"),
        &exe,
        Build::Quick,
    )?;
    Some(exe)
}

/// One quantization case: the scheme, input dtype, shape, the input's bytes.
struct Case {
    label: String,
    scheme: Scheme,
    dtype: DType,
    shape: Vec<usize>,
    src: Vec<u8>,
}

fn quantize_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // (ModelOpt's NVFP4 is read only: its dequantization is among the dequantize cases.)
    for (name, dtype, scheme) in schemes().into_iter().filter(|(_, _, s)| s.quantizes()) {
        for shape in shapes(&scheme) {
            for kind in 0..5 {
                let n: usize = shape.iter().product();
                let src = if kind == 1 && dtype == DType::Float16 {
                    // Every float16 bit pattern at random.
                    (0..n)
                        .flat_map(|_| (rng.next() as u16).to_le_bytes())
                        .collect()
                } else {
                    stored(&values(kind, n, &mut rng), dtype)
                };
                cases.push(Case {
                    label: format!("{name} from {dtype}, shape {shape:?}, inputs of kind {kind}"),
                    scheme,
                    dtype,
                    src,
                    shape: shape.clone(),
                });
            }
        }
    }
    cases
}

#[test]
fn the_scaled_kernels_quantize_as_the_cpu_when_run_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = harness(dir.path()) else {
        return;
    };
    let cases = quantize_cases();
    // Round 1: every case's amaxes.
    let mut jobs = Vec::new();
    let mut counts = Vec::new();
    for c in &cases {
        let q = Quantizer::new(c.dtype, &c.shape, &c.scheme).unwrap();
        let (rows, cols) = q.rows_cols();
        jobs.push(2u8);
        jobs.extend([c.dtype.index() as u8, u8::from(q.amax_nan_is_default())]);
        put_layout(&mut jobs, &c.scheme, rows, cols);
        jobs.extend((q.scale_count() as u64).to_le_bytes());
        put_bytes(&mut jobs, &c.src);
        counts.push(q.scale_count());
    }
    let out = run_harness(&exe, jobs);
    let mut at = 0;
    let mut plans = Vec::new();
    for (c, &count) in cases.iter().zip(&counts) {
        let amax: Vec<f32> = out[at..at + 4 * count]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        at += 4 * count;
        let q = Quantizer::new(c.dtype, &c.shape, &c.scheme).unwrap();
        plans.push(q.plan(&amax).unwrap());
    }
    // Round 2: the elements, with the plans made from those amaxes.
    let mut jobs = Vec::new();
    for (c, plan) in cases.iter().zip(&plans) {
        let (rows, cols) = Quantizer::new(c.dtype, &c.shape, &c.scheme)
            .unwrap()
            .rows_cols();
        jobs.push(3u8);
        jobs.extend([
            c.dtype.index() as u8,
            c.scheme.element.index() as u8,
            quirk_bits(DType::Float32, c.scheme.element),
            u8::from(plan.divide),
            cuda::arithmetic_code(plan.arithmetic).unwrap() as u8,
            u8::from(plan.canonical_nan),
            u8::from(plan.compressed_tensors_float4),
        ]);
        jobs.extend(plan.limit.to_le_bytes());
        put_layout(&mut jobs, &c.scheme, rows, cols);
        put_bytes(&mut jobs, &f32_bytes(&plan.factors));
        put_bytes(&mut jobs, &c.src);
    }
    let out = run_harness(&exe, jobs);
    let mut at = 0;
    let mut failures = Vec::new();
    let mut compared = 0usize;
    for (c, plan) in cases.iter().zip(&plans) {
        let cpu = quantize(&c.src, c.dtype, &c.shape, &c.scheme).unwrap();
        let got = &out[at..at + cpu.elements.len()];
        at += cpu.elements.len();
        compared += cpu.elements.len();
        if let Some(i) = got.iter().zip(&cpu.elements).position(|(g, w)| g != w) {
            failures.push(format!(
                "{}: element byte {i}: cuda {:02x}, cpu {:02x}",
                c.label, got[i], cpu.elements[i]
            ));
        }
        if plan.scales != cpu.scales {
            failures.push(format!("{}: scales differ", c.label));
        }
        if plan.global_scale.map(f32::to_bits) != cpu.global_scale.map(f32::to_bits) {
            failures.push(format!(
                "{}: global scale {:?} vs {:?}",
                c.label, plan.global_scale, cpu.global_scale
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(compared > 100_000, "only {compared} element bytes compared");
    eprintln!(
        "{} quantization cases, {compared} element bytes: equal",
        cases.len()
    );
}

/// One dequantization case.
struct Stored {
    label: String,
    scheme: Scheme,
    shape: Vec<usize>,
    elements: Vec<u8>,
    scales: Vec<u8>,
    global_scale: Option<f32>,
}

fn dequantize_cases() -> Vec<Stored> {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut cases = Vec::new();
    // (MXFP6's float6 is dequantized on the CPU alone: the kernels refuse it.)
    let on_gpu = |s: &Scheme| s.element != DType::Float6E2M3Fn;
    for (name, dtype, scheme) in schemes().into_iter().filter(|(_, _, s)| on_gpu(s)) {
        let mut shapes = shapes(&scheme);
        if name.starts_with("gpt_oss") {
            // gpt-oss: [experts, rows, cols], transposed on the way out.
            shapes.push(vec![2, 3, 64]);
            shapes.push(vec![3, 1, 32]);
        }
        for shape in shapes {
            let (rows, cols) = dtcast::quant::matrix_shape(&shape).unwrap();
            let n = rows * cols;
            let count = scheme.scale_count(rows, cols).unwrap();
            let scale_size = scheme.scale.byte_size().unwrap();
            for kind in 0..3 {
                // Every code (NaN codes included), then random codes.
                let elements: Vec<u8> = (0..scheme.element.storage_bytes(n).unwrap())
                    .map(|i| if kind == 0 { i as u8 } else { rng.next() as u8 })
                    .collect();
                let scales: Vec<u8> = if scale_size == 1 {
                    // E8M0 or float8 bytes: 0, 255 and NaN codes among them in kind 1.
                    (0..count)
                        .map(|i| match kind {
                            0 => 100 + (i % 50) as u8,
                            1 => rng.next() as u8,
                            _ => [0u8, 1, 126, 127, 128, 254, 255, 0x7F, 0xFF][i % 9],
                        })
                        .collect()
                } else {
                    let v: Vec<f32> = (0..count)
                        .map(|i| match (kind, i % 5) {
                            (2, 0) => f32::NAN,
                            (2, 1) => f32::INFINITY,
                            (2, 2) => 0.0,
                            _ => f32::from_bits(0x3800_0000 + (rng.next() as u32 % 0x0C00_0000)),
                        })
                        .collect();
                    stored(&v, scheme.scale)
                };
                let global_scale = scheme
                    .global_scale
                    .then_some([2688.0 / 3.7, 1e-30, 448.0][kind]);
                cases.push(Stored {
                    label: format!("{name} (weights {dtype}), shape {shape:?}, kind {kind}"),
                    scheme,
                    shape: shape.clone(),
                    elements,
                    scales,
                    global_scale,
                });
            }
        }
    }
    cases
}

#[test]
fn the_scaled_kernels_dequantize_as_the_cpu_when_run_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = harness(dir.path()) else {
        return;
    };
    let cases = dequantize_cases();
    let outs = [DType::Float32, DType::BFloat16, DType::Float16];
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    for c in &cases {
        let q = Quantized {
            elements: &c.elements,
            shape: &c.shape,
            scales: &c.scales,
            global_scale: c.global_scale,
        };
        for out in outs {
            let plan = DequantPlan::new(&q, &c.scheme, out).unwrap();
            jobs.push(u8::from(plan.gpt_oss_experts.is_some()));
            jobs.extend([
                c.scheme.element.bits() as u8,
                out.index() as u8,
                quirk_bits(DType::Float32, out),
                u8::from(plan.by_scale_byte),
            ]);
            put_layout(&mut jobs, &c.scheme, plan.rows, plan.cols);
            let per_expert = plan.gpt_oss_experts.map_or(1, |e| plan.rows / e.max(1));
            jobs.extend((per_expert as u64).to_le_bytes());
            put_bytes(&mut jobs, &f32_bytes(&plan.values));
            put_bytes(&mut jobs, &f32_bytes(&plan.factors));
            put_bytes(&mut jobs, &c.scales);
            put_bytes(&mut jobs, &c.elements);
            expected.push((
                format!("{} into {out}", c.label),
                out,
                dequantize(&q, &c.scheme, out).unwrap(),
            ));
        }
    }
    let got = run_harness(&exe, jobs);
    let mut at = 0;
    let mut failures = Vec::new();
    for (label, out, want) in &expected {
        let got = &got[at..at + want.len()];
        at += want.len();
        let k = out.byte_size().unwrap();
        if let Some(i) = got.chunks(k).zip(want.chunks(k)).position(|(g, w)| g != w) {
            failures.push(format!(
                "{label}: element {i}: cuda {:02x?}, cpu {:02x?}",
                &got[i * k..(i + 1) * k],
                &want[i * k..(i + 1) * k]
            ));
        }
    }
    assert_eq!(at, got.len(), "the harness wrote more than the cases need");
    eprintln!(
        "{} dequantization cases, {at} output bytes: equal",
        expected.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        expected.len(),
        failures.join("\n")
    );
}

#[test]
fn nvrtc_compiles_the_scaled_kernels_where_nvrtc_is_installed() {
    // NVRTC needs no GPU, only libnvrtc.
    match cuda::compile_scaled_kernels(None) {
        Err(dtcast::TensorError::CudaUnavailable(why)) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
        other => other.unwrap(),
    }
    // From sm_89 the float8 rounding is the GPU's instruction: that path compiles for Hopper.
    cuda::compile_scaled_kernels(Some("compute_90")).unwrap();
}

#[test]
fn on_a_gpu_the_scaled_kernels_give_the_cpu_bytes() {
    if !cuda_available() {
        eprintln!(
            "SKIPPED: no CUDA device; the scaled kernels' bytes were checked on the host instead"
        );
        return;
    }
    let mut failures = Vec::new();
    for c in quantize_cases() {
        let cpu = quantize(&c.src, c.dtype, &c.shape, &c.scheme).unwrap();
        let x = Tensor::from_bytes(&c.src, c.dtype, &c.shape)
            .unwrap()
            .to("cuda:0")
            .unwrap();
        let gpu = cuda::quantize(&x, &c.scheme).unwrap();
        let elements = gpu.elements.to_bytes().unwrap();
        if elements != cpu.elements || gpu.scales.to_bytes().unwrap() != cpu.scales {
            failures.push(format!("quantize {}", c.label));
        }
        for out in [DType::Float32, DType::BFloat16, DType::Float16] {
            let q = cpu.view(&c.shape);
            let want = dequantize(&q, &c.scheme, out).unwrap();
            let e = Tensor::from_bytes(&cpu.elements, DType::UInt8, &[cpu.elements.len()])
                .unwrap()
                .to("cuda:0")
                .unwrap();
            let s = Tensor::from_bytes(&cpu.scales, DType::UInt8, &[cpu.scales.len()])
                .unwrap()
                .to("cuda:0")
                .unwrap();
            let dense =
                cuda::dequantize(&e, &s, &c.shape, cpu.global_scale, &c.scheme, out).unwrap();
            if dense.to_bytes().unwrap() != want {
                failures.push(format!("dequantize {} into {out}", c.label));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn without_a_gpu_the_scaled_kernels_say_why() {
    if cuda_available() {
        return;
    }
    let x = Tensor::from_vec(vec![1.0f32; 32], &[1, 32]).unwrap();
    let scheme = Scheme::named("ct_mxfp4", DType::Float32).unwrap();
    // A CPU tensor: the error names both devices.
    let e = cuda::quantize(&x, &scheme).unwrap_err().to_string();
    assert!(e.contains("cpu") && e.contains("cuda"), "{e}");
    // A CUDA tensor cannot even be made here: CUDA is not available, and says why.
    let e = x.to("cuda:0").unwrap_err().to_string();
    assert!(e.starts_with("CUDA is not available: "), "{e}");
}

#[test]
fn the_scheme_bench_compares_the_gpus_bytes_with_the_cpus_or_says_why_it_cannot() {
    // `dtcast bench --scheme ... --device cuda:0`: on a GPU, every scheme quantized and
    // dequantized on the device, the bench failing where a byte differs from the CPU's (a
    // 128-row weight: whole 128x128 blocks, many groups); without one, a clear error before any
    // work.
    let o = dtcast_tests::dtcast_cli(
        &[
            "bench",
            "--scheme",
            "fp8-block,mxfp4,nvfp4",
            "--elements",
            "524288",
            "--device",
            "cuda:0",
            "--repeat",
            "1",
            "--json",
        ],
        "",
    );
    if cuda_available() {
        assert_eq!(o.code, 0, "{}", o.stderr);
        // One line per scheme and direction.
        assert_eq!(o.stdout.lines().count(), 6, "{}", o.stdout);
    } else {
        eprintln!("SKIPPED: no CUDA device; the scheme bench's error without one is checked");
        assert_eq!(o.code, 1);
        assert!(o.stderr.contains("CUDA is not available: "), "{}", o.stderr);
    }
    // The CPU's kernel choices do not apply on a GPU: an error whatever the machine.
    let o = dtcast_tests::dtcast_cli(
        &[
            "bench",
            "--scheme",
            "nvfp4",
            "--device",
            "cuda:0",
            "--threads",
            "2",
        ],
        "",
    );
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("leave them out"), "{}", o.stderr);
}
