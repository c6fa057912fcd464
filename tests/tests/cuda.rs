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

#[test]
fn cuda_kernel_source_matches_the_cpu_rules_when_run_on_the_host() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("harness");
    let compiled = ["c++", "g++", "clang++"].iter().find_map(|cxx| {
        Command::new(cxx)
            .args(["-O1", "-std=c++14", "-I"])
            .arg(root.join("device/src/cuda"))
            .arg("-o")
            .arg(&exe)
            .arg(root.join("tests/cuda_host/harness.cpp"))
            .status()
            .ok()
            .filter(|s| s.success())
    });
    if compiled.is_none() {
        eprintln!("SKIPPED: no C++ compiler (c++, g++, clang++) to run kernels.cu on the host");
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
    let mut child = Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&jobs));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "harness failed: {:?}", out.status);
    let mut at = 0;
    let mut failures = Vec::new();
    for ((from, to, saturate, len), want) in labels.iter().zip(&expected) {
        let got = &out.stdout[at..at + len];
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
    assert_eq!(at, out.stdout.len());
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
    if let Err(e) = dtcast::device::cuda::compile_kernel(DType::Float32, DType::BFloat16, false) {
        if matches!(e, dtcast::TensorError::CudaUnavailable(_)) {
            eprintln!("SKIPPED: {e}");
            return;
        }
        panic!("{e}");
    }
    for from in DType::ALL {
        for to in DType::ALL {
            for saturate in [false, true] {
                if let Err(e) = dtcast::device::cuda::compile_kernel(from, to, saturate) {
                    panic!("{e}");
                }
            }
        }
    }
}
