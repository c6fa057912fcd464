//! The CUDA backend: its kernels give the CPU's bytes.
//!
//! Two levels:
//! - `kernels.cu` compiled as plain C++ on the host (any machine with a C++ compiler) runs every
//!   pair and both kernel modes against the Rust CPU rules — this checks the CUDA source's rules
//!   without a GPU;
//! - on a machine with a GPU, the real kernels run through `Tensor::to` and are compared the same
//!   way (skipped, visibly, elsewhere).

use std::io::Write;
use std::process::{Command, Stdio};

use dtcast::cast::{cast_reference, CastMode};
use dtcast::{DType, Device, Tensor, ToOptions};
use dtcast_tests::fixture;

/// Source values for a dtype: the torch fixture's values plus pseudo-random bit patterns.
fn values(dt: DType) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let serde_json::Value::Array(sources) = fixture("torch_cast.json") {
        for s in sources.iter().filter(|s| s["src"] == dt.name()) {
            for v in s["values"].as_array().unwrap() {
                let h = v.as_str().unwrap();
                bytes.extend(
                    (0..h.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap()),
                );
            }
        }
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ dt.index() as u64;
    for _ in 0..200 * dt.itemsize() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.push((state >> 32) as u8);
    }
    bytes
}

fn reference(src: &[u8], from: DType, to: DType, saturate: bool) -> Vec<u8> {
    let mut out = vec![0u8; src.len() / from.itemsize() * to.itemsize()];
    let mode = if saturate {
        CastMode::Saturate
    } else {
        CastMode::Torch
    };
    cast_reference(src, from, &mut out, to, mode).unwrap();
    out
}

/// Compiles a C++ file that includes `kernels.cu` into an executable, with whichever C++ compiler
/// the machine has; `None` (after a SKIPPED note) when it has none.
fn compile_cpp(cpp: &std::path::Path, exe: &std::path::Path) -> Option<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let compiled = ["c++", "g++", "clang++"].iter().find_map(|cxx| {
        Command::new(cxx)
            .args(["-O1", "-std=c++14", "-I"])
            .arg(root.join("device/src/cuda"))
            .arg("-o")
            .arg(exe)
            .arg(cpp)
            .status()
            .ok()
            .filter(|s| s.success())
    });
    if compiled.is_none() {
        eprintln!("SKIPPED: no C++ compiler (c++, g++, clang++) to run kernels.cu on the host");
    }
    compiled.map(|_| ())
}

/// Runs a harness with `input` on stdin; its stdout.
fn run_harness(exe: &std::path::Path, input: Vec<u8>) -> Vec<u8> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "harness failed: {:?}", out.status);
    out.stdout
}

#[test]
fn cuda_kernel_source_matches_the_cpu_rules_when_run_on_the_host() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("harness");
    if compile_cpp(&root.join("tests/cuda_host/harness.cpp"), &exe).is_none() {
        return;
    }
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    let mut labels = Vec::new();
    for from in DType::ALL {
        let src = values(from);
        let n = src.len() / from.itemsize();
        for to in DType::ALL {
            for saturate in [false, true] {
                jobs.extend([from.index() as u8, to.index() as u8, u8::from(saturate)]);
                jobs.extend((n as u32).to_le_bytes());
                jobs.extend(&src);
                let want = reference(&src, from, to, saturate);
                labels.push((from, to, saturate, want.len()));
                expected.push(want);
            }
        }
    }
    let stdout = run_harness(&exe, jobs);
    let mut at = 0;
    let mut failures = Vec::new();
    for ((from, to, saturate, len), want) in labels.iter().zip(&expected) {
        let got = &stdout[at..at + len];
        at += len;
        if let Some(i) = got
            .chunks(to.itemsize())
            .zip(want.chunks(to.itemsize()))
            .position(|(g, w)| g != w)
        {
            let k = to.itemsize();
            failures.push(format!(
                "{from} -> {to} (saturate {saturate}) element {i}: cuda {:02x?}, cpu {:02x?}",
                &got[i * k..(i + 1) * k],
                &want[i * k..(i + 1) * k]
            ));
        }
    }
    assert_eq!(at, stdout.len());
    assert!(
        failures.is_empty(),
        "{} of {} pair-modes differ:\n{}",
        failures.len(),
        labels.len(),
        failures.join("\n")
    );
}

#[test]
fn cuda_casts_give_the_cpu_bytes_on_a_gpu() {
    if !Device::cuda_available() {
        eprintln!("SKIPPED: CUDA is not available on this machine (no driver library or no GPU)");
        return;
    }
    let gpu = Device::Cuda(0);
    for from in DType::ALL {
        let src = values(from);
        let n = src.len() / from.itemsize();
        let t = Tensor::from_bytes(&src, from, &[n]).unwrap();
        let on_gpu = t.to(gpu).unwrap();
        assert_eq!(
            on_gpu.to_bytes().unwrap(),
            src,
            "{from} round trip through the GPU"
        );
        for to in DType::ALL {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let cpu = t
                    .to_with(
                        to,
                        ToOptions {
                            mode,
                            ..Default::default()
                        },
                    )
                    .unwrap()
                    .to_bytes()
                    .unwrap();
                let gpu_cast = on_gpu
                    .to_with(
                        to,
                        ToOptions {
                            mode,
                            ..Default::default()
                        },
                    )
                    .unwrap();
                assert_eq!(gpu_cast.device(), gpu);
                assert_eq!(
                    gpu_cast.to_bytes().unwrap(),
                    cpu,
                    "{from} -> {to} ({mode}) on the GPU"
                );
            }
        }
    }
}

#[test]
fn cuda_transfers_round_trip_and_non_blocking_reads_wait_on_a_gpu() {
    if !Device::cuda_available() {
        eprintln!("SKIPPED: CUDA is not available on this machine (no driver library or no GPU)");
        return;
    }
    let t = Tensor::from_vec(
        (0..100_000).map(|i| i as f32 * 0.25).collect::<Vec<_>>(),
        &[100, 1000],
    )
    .unwrap();
    let opts = ToOptions {
        non_blocking: true,
        ..Default::default()
    };
    let g = t.to_with((Device::Cuda(0), DType::BFloat16), opts).unwrap();
    let back = g.to_with((Device::Cpu, DType::Float32), opts).unwrap();
    let direct = t.to(DType::BFloat16).unwrap().to(DType::Float32).unwrap();
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        direct.to_vec::<f32>().unwrap()
    );
    assert_eq!(back.shape(), &[100, 1000]);
}

#[test]
fn without_cuda_every_cuda_call_is_a_clear_error() {
    if Device::cuda_available() {
        eprintln!("SKIPPED: this machine has CUDA; the no-CUDA errors are checked elsewhere");
        return;
    }
    let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    for r in [
        t.to(Device::Cuda(0)).map(|_| ()),
        t.to("cuda:1").map(|_| ()),
        Tensor::zeros(&[2], DType::Float32, Device::Cuda(0)).map(|_| ()),
    ] {
        let e = r.unwrap_err().to_string();
        assert!(e.starts_with("CUDA is not available: "), "{e}");
    }
}

#[test]
fn nvrtc_compiles_every_kernel_where_nvrtc_is_installed() {
    // NVRTC needs no GPU, only libnvrtc: where it is present, every pair and mode must compile.
    if let Err(e) =
        dtcast::device::cuda::compile_kernel(DType::Float32, DType::BFloat16, CastMode::Torch)
    {
        if matches!(e, dtcast::TensorError::CudaUnavailable(_)) {
            eprintln!("SKIPPED: {e}");
            return;
        }
        panic!("{e}");
    }
    for from in DType::ALL {
        for to in DType::ALL {
            for mode in CastMode::ALL {
                if let Err(e) = dtcast::device::cuda::compile_kernel(from, to, mode) {
                    panic!("{e}");
                }
            }
        }
    }
}

#[test]
fn cuda_check_source_matches_the_cpu_rules_when_run_on_the_host() {
    // The Checked / Exact check kernels (`DTCAST_CHECK` lines, limits included) compiled as C++ on
    // the host: their verdict on every element must be the CPU rules' verdict.
    use dtcast::device::cuda::check_line;
    let dir = tempfile::tempdir().unwrap();
    let mut src = String::from(
        "#include \"kernels.cu\"\n#include <cstdio>\n#include <vector>\n\
         #define DTCAST_CHECK(S, D, EXACT, Q16, QBF, QF8, ...) \
         static void run(const u8* src, u64 n, u8* out) { Quirks q = {Q16, QBF, QF8}; Limits l = {__VA_ARGS__}; \
         for (u64 i = 0; i < n; ++i) out[i] = check_one<S, D, EXACT>(src, i, q, l) ? 1 : 0; }\n",
    );
    let mut jobs = Vec::new();
    for from in DType::ALL {
        for to in DType::ALL {
            for exact in [false, true] {
                src.push_str(&format!(
                    "namespace c{} {{ {} }}\n",
                    jobs.len(),
                    check_line(from, to, exact).trim()
                ));
                jobs.push((from, to, exact));
            }
        }
    }
    src.push_str("typedef void (*Run)(const u8*, u64, u8*);\nstatic const Run TABLE[] = {");
    for k in 0..jobs.len() {
        src.push_str(&format!("c{k}::run,"));
    }
    src.push_str(
        "};\nint main() { std::vector<u8> in, out; for (;;) { unsigned char h[6]; if (fread(h, 1, 6, stdin) != 6) return 0; \
         unsigned k = h[0] | (h[1] << 8); u64 n = (u64)h[2] | ((u64)h[3] << 8) | ((u64)h[4] << 16) | ((u64)h[5] << 24); \
         out.resize(n); \
         u64 bytes; if (fread(&bytes, 8, 1, stdin) != 1) return 3; in.resize(bytes); if (bytes && fread(in.data(), 1, bytes, stdin) != bytes) return 4; \
         TABLE[k](in.data(), n, out.data()); fwrite(out.data(), 1, n, stdout); } }\n",
    );
    let cpp = dir.path().join("checks.cpp");
    std::fs::write(&cpp, src).unwrap();
    let exe = dir.path().join("checks");
    if compile_cpp(&cpp, &exe).is_none() {
        return;
    }
    let values: Vec<Vec<u8>> = DType::ALL.iter().map(|d| values(*d)).collect();
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for (k, (from, to, exact)) in jobs.iter().enumerate() {
        let v = &values[from.index()];
        let n = v.len() / from.itemsize();
        input.extend((k as u16).to_le_bytes());
        input.extend(&(n as u32).to_le_bytes());
        input.extend((v.len() as u64).to_le_bytes());
        input.extend(v);
        let mode = if *exact {
            CastMode::Exact
        } else {
            CastMode::Checked
        };
        expected.push(
            v.chunks(from.itemsize())
                .map(|e| {
                    let mut out = vec![0u8; to.itemsize()];
                    u8::from(cast_reference(e, *from, &mut out, *to, mode).is_ok())
                })
                .collect::<Vec<u8>>(),
        );
    }
    let stdout = run_harness(&exe, input);
    let mut at = 0;
    let mut failures = Vec::new();
    for ((from, to, exact), want) in jobs.iter().zip(&expected) {
        let got = &stdout[at..at + want.len()];
        at += want.len();
        if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
            failures.push(format!(
                "{from} -> {to} (exact {exact}) element {i}: cuda says ok={}, cpu ok={}",
                got[i], want[i]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} checks differ:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}
