//! The CUDA backend: its kernels give the CPU's bytes.
//!
//! Two levels:
//! - `kernels.cu` compiled as plain C++ on the host (any machine with a C++ compiler) runs every
//!   pair and both kernel modes against the Rust CPU rules — this checks the CUDA source's rules
//!   without a GPU;
//! - on a machine with a GPU, the real kernels run through `Tensor::to` and are compared the same
//!   way (skipped, visibly, elsewhere).

use std::process::Command;

use dtcast::cast::{cast_reference, CastMode};
use dtcast::device::cuda_available;
use dtcast::{DType, Device, Tensor, ToOptions};
use dtcast_tests::cuda_host::{compile_cpp, quirk_bits, run_harness, Build};
use dtcast_tests::fixture;

/// The dtypes the CUDA kernels cast: every dtype with values (all but float4_e2m1fn_x2, which
/// casts as a float4_e2m1fn view, on either device).
fn cuda_dtypes() -> Vec<DType> {
    DType::ALL
        .into_iter()
        .filter(|d| dtcast::device::cuda::lane(*d).is_some())
        .collect()
}

/// Bytes per element as the kernels hold one (a packed element: one byte, its code).
fn unit(dt: DType) -> usize {
    dt.byte_size().unwrap_or(1)
}

/// Source values for a dtype: the torch fixture's values plus pseudo-random bit patterns; for a
/// packed dtype every code four times, then random codes (256 elements, packed).
fn values(dt: DType) -> Vec<u8> {
    if dt.is_packed() {
        let codes = 1usize << dt.bits();
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ dt.index() as u64;
        let elements: Vec<u8> = (0..256)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let random = (state >> 32) as usize;
                (if i < 4 * codes { i } else { random } % codes) as u8
            })
            .collect();
        let mut packed = vec![0u8; dt.storage_bytes(256).unwrap()];
        dtcast::dtype::packing::pack(dt, &elements, &mut packed).unwrap();
        return packed;
    }
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
    for _ in 0..200 * dt.byte_size().unwrap_or(1) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.push((state >> 32) as u8);
    }
    bytes
}

/// How many of a source's elements a job casts into `to`: all of them, or a multiple of 8 where
/// `to` is packed (its storage must end on a byte).
fn job_elements(src: &[u8], from: DType, to: DType) -> usize {
    let n = from.elements_in(src.len()).unwrap();
    if to.is_packed() {
        n - n % 8
    } else {
        n
    }
}

fn reference(src: &[u8], from: DType, to: DType, saturate: bool) -> Vec<u8> {
    let n = from.elements_in(src.len()).unwrap();
    let mut out = vec![0u8; to.storage_bytes(n).unwrap()];
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
    if compile_cpp(
        &root.join("tests/cuda_host/harness.cpp"),
        &exe,
        Build::Quick,
    )
    .is_none()
    {
        return;
    }
    let mut jobs = Vec::new();
    let mut expected = Vec::new();
    let mut labels = Vec::new();
    for from in cuda_dtypes() {
        let all = values(from);
        for to in cuda_dtypes() {
            let n = job_elements(&all, from, to);
            let src = &all[..from.storage_bytes(n).unwrap()];
            for saturate in [false, true] {
                let quirks = quirk_bits(from, to);
                jobs.extend([
                    from.index() as u8,
                    to.index() as u8,
                    u8::from(saturate),
                    quirks,
                ]);
                jobs.extend((n as u32).to_le_bytes());
                jobs.extend(src);
                let want = reference(src, from, to, saturate);
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
        // Packed destinations compare byte by byte.
        let k = to.byte_size().unwrap_or(1);
        if let Some(i) = got.chunks(k).zip(want.chunks(k)).position(|(g, w)| g != w) {
            failures.push(format!(
                "{from} -> {to} (saturate {saturate}) element/byte {i}: cuda {:02x?}, cpu {:02x?}",
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

/// `false` (after a SKIPPED note) where there is no GPU to run on.
fn gpu() -> bool {
    if cuda_available() {
        return true;
    }
    eprintln!("SKIPPED: CUDA is not available on this machine (no driver library or no GPU)");
    false
}

/// Runs `job` for every source dtype, each on its own thread (so that the kernels of different
/// pairs compile at the same time), and gathers the failures it reports.
fn per_source(job: impl Fn(DType) -> Vec<String> + Sync) -> Vec<String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = cuda_dtypes()
            .into_iter()
            .map(|from| {
                let job = &job;
                scope.spawn(move || job(from))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a GPU test thread panicked"))
            .collect()
    })
}

fn assert_none(failures: Vec<String>, what: &str) {
    assert!(
        failures.is_empty(),
        "{} {what} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every pair's kernels in every mode, compiled once for the tests that cast them all: many to
/// an NVRTC program, on every core (`cuda::precompile`), rather than one at a time as each is
/// first used — which took these tests minutes on a 16-core GPU machine. The casts then run the
/// precompiled functions (the other GPU tests compile theirs on first use).
fn precompiled() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let dtypes = cuda_dtypes();
        let casts: Vec<_> = dtypes
            .iter()
            .flat_map(|&from| {
                dtypes
                    .iter()
                    .flat_map(move |&to| CastMode::ALL.map(|mode| (from, to, mode)))
            })
            .collect();
        let began = std::time::Instant::now();
        let n = dtcast::device::cuda::precompile(0, &casts).unwrap();
        eprintln!(
            "precompiled {n} kernels in {:.1} s",
            began.elapsed().as_secs_f64()
        );
    });
}

/// A cast's bytes, or its error's text.
fn outcome(t: &Tensor, to: DType, mode: CastMode) -> Result<Vec<u8>, String> {
    t.to_with(
        to,
        ToOptions {
            mode,
            ..Default::default()
        },
    )
    .and_then(|r| r.to_bytes())
    .map_err(|e| e.to_string())
}

#[test]
fn cuda_casts_give_the_cpu_bytes_and_errors_on_a_gpu() {
    // Every pair in every mode, on the fixture values and random bits, and on short lengths (the
    // last, partial tile of a thread): the GPU's bytes are the CPU's, and where the CPU refuses a
    // Checked / Exact cast the GPU refuses it with the same message (element index and value).
    if !gpu() {
        return;
    }
    precompiled();
    let failures = per_source(|from| {
        let mut failures = Vec::new();
        // A multiple of 8 elements, so that every destination's storage ends on a byte; the short
        // lengths below take the partial tiles.
        let all = values(from);
        let n = from.elements_in(all.len()).unwrap() / 8 * 8;
        let src = all[..from.storage_bytes(n).unwrap()].to_vec();
        let t = Tensor::from_bytes(&src, from, &[n]).unwrap();
        let on_gpu = match t.to(Device::Cuda(0)) {
            Ok(g) => g,
            Err(e) => return vec![format!("{from} to the GPU: {e}")],
        };
        if on_gpu.to_bytes().ok().as_ref() != Some(&src) {
            failures.push(format!(
                "{from}: round trip through the GPU changed the bytes"
            ));
        }
        for to in cuda_dtypes() {
            for mode in CastMode::ALL {
                let cpu = outcome(&t, to, mode);
                let gpu = outcome(&on_gpu, to, mode);
                if gpu != cpu {
                    failures.push(format!(
                        "{from} -> {to} ({mode}), {n} elements: gpu {}, cpu {}",
                        describe(&gpu, to),
                        describe(&cpu, to)
                    ));
                    continue;
                }
                if !matches!(mode, CastMode::Torch | CastMode::Saturate) {
                    continue;
                }
                let whole =
                    |len: usize| from.storage_bytes(len).is_ok() && to.storage_bytes(len).is_ok();
                for len in [0, 1, 8, 15, 16, 17, 24, 33, 40]
                    .into_iter()
                    .filter(|&l| l < n && whole(l))
                {
                    let bytes = from.storage_bytes(len).unwrap();
                    let short = Tensor::from_bytes(&src[..bytes], from, &[len]).unwrap();
                    let short_gpu = short.to(Device::Cuda(0)).unwrap();
                    let (g, c) = (outcome(&short_gpu, to, mode), outcome(&short, to, mode));
                    if g != c {
                        failures.push(format!(
                            "{from} -> {to} ({mode}), {len} elements: gpu {}, cpu {}",
                            describe(&g, to),
                            describe(&c, to)
                        ));
                    }
                }
            }
        }
        failures
    });
    assert_none(failures, "pair-modes");
}

/// The first differing element of two outcomes, or the error.
fn describe(r: &Result<Vec<u8>, String>, to: DType) -> String {
    match r {
        Ok(b) => format!(
            "{} bytes, first {:02x?}",
            b.len(),
            &b[..b.len().min(2 * unit(to))]
        ),
        Err(e) => format!("error `{e}`"),
    }
}

#[test]
fn cuda_every_8_and_16_bit_pattern_casts_as_on_the_cpu_on_a_gpu() {
    // Exhaustive over the small dtypes (every float16, bfloat16, float8, (u)int8/16 bit pattern;
    // NaN payloads and subnormals included) into every dtype in every mode: the GPU's conversion
    // instructions (float16 <-> float32) must agree with the rules everywhere, not only on samples.
    if !gpu() {
        return;
    }
    precompiled();
    let failures = per_source(|from| {
        let bits = from.bits();
        if bits > 16 || from.is_complex() {
            return Vec::new();
        }
        // Every pattern (a packed dtype's codes repeated to 64 elements, packed).
        let n = (1usize << bits).max(64);
        let patterns: Vec<u8> = (0..n)
            .flat_map(|p| p.to_le_bytes()[..unit(from)].to_vec())
            .collect();
        let mut src = vec![0u8; from.storage_bytes(n).unwrap()];
        if from.is_packed() {
            let codes: Vec<u8> = patterns.iter().map(|c| c % (1 << bits)).collect();
            dtcast::dtype::packing::pack(from, &codes, &mut src).unwrap();
        } else {
            src = patterns;
        }
        let t = Tensor::from_bytes(&src, from, &[n]).unwrap();
        let g = t.to(Device::Cuda(0)).unwrap();
        let mut failures = Vec::new();
        for to in cuda_dtypes() {
            for mode in CastMode::ALL {
                let (c, d) = (outcome(&t, to, mode), outcome(&g, to, mode));
                if c != d {
                    failures.push(format!(
                        "{from} -> {to} ({mode}), all {n} patterns: gpu {}, cpu {}",
                        first_difference(&d, &c, from, to),
                        describe(&c, to)
                    ));
                }
            }
        }
        failures
    });
    assert_none(failures, "pair-modes");
}

#[test]
fn cuda_every_float32_pattern_rounds_as_on_the_cpu_on_a_gpu() {
    // Every one of the 2^32 float32 bit patterns into the narrow floating dtypes (which on sm_89
    // and later round with the GPU's conversion instructions) and int32 (converted in float32
    // arithmetic), in 2^22-value slices: 16 MiB, below the size (32 MiB) from which the allocator
    // maps fresh pages for every buffer, so that the host's outputs reuse freed memory instead of
    // faulting in ~30 GiB of new pages (on a 2-core VM, perf showed the page faults costing more
    // than the casts).
    if !gpu() {
        return;
    }
    let slice = 1u64 << 22;
    let targets = [
        DType::Float16,
        DType::BFloat16,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
        DType::Int32,
    ];
    let mut failures = Vec::new();
    let began = std::time::Instant::now();
    for start in (0..1u64 << 32).step_by(slice as usize) {
        // Progress, for a GPU session's bounded time (seen with --nocapture).
        if start % (1 << 28) == 0 {
            eprintln!(
                "float32 patterns {start:#x}..: {:.1} s",
                began.elapsed().as_secs_f64()
            );
        }
        let src: Vec<u32> = (start..start + slice).map(|b| b as u32).collect();
        let t = Tensor::from_vec(src, &[slice as usize])
            .unwrap()
            .bitcast(DType::Float32, &dtcast::bitcast::View)
            .unwrap();
        let g = t.to(Device::Cuda(0)).unwrap();
        for to in targets {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let (c, d) = (outcome(&t, to, mode), outcome(&g, to, mode));
                if c != d {
                    failures.push(format!(
                        "float32 patterns {start:#x}.. -> {to} ({mode}): gpu {}",
                        first_difference(&d, &c, DType::Float32, to),
                    ));
                }
            }
        }
    }
    assert_none(failures, "slices");
}

/// Where two outcomes first differ: the element's index and both results.
fn first_difference(
    gpu: &Result<Vec<u8>, String>,
    cpu: &Result<Vec<u8>, String>,
    from: DType,
    to: DType,
) -> String {
    match (gpu, cpu) {
        (Ok(g), Ok(c)) => {
            let k = unit(to);
            let i = g
                .chunks(k)
                .zip(c.chunks(k))
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let diffs = g.chunks(k).zip(c.chunks(k)).filter(|(a, b)| a != b).count();
            format!(
                "{diffs} elements differ; first: element {i} of the {from} source: gpu {:02x?}, cpu {:02x?}",
                &g[i * k..(i + 1) * k],
                &c[i * k..(i + 1) * k]
            )
        }
        (g, _) => describe(g, to),
    }
}

#[test]
fn cuda_checked_errors_name_the_first_bad_element_of_a_large_tensor_on_a_gpu() {
    // Many threads find bad elements at once; the one reported is the first, as on the CPU.
    if !gpu() {
        return;
    }
    let n = 8 << 20;
    let mut v = vec![1.5f32; n];
    for (i, x) in [
        (7_000_000, f32::NAN),
        (5_000_003, 3e9),
        (6_000_000, f32::INFINITY),
    ] {
        v[i] = x;
    }
    let t = Tensor::from_vec(v, &[n]).unwrap();
    let g = t.to(Device::Cuda(0)).unwrap();
    for (to, mode) in [
        (DType::Int32, CastMode::Checked),
        (DType::Float16, CastMode::Checked),
        (DType::BFloat16, CastMode::Exact),
    ] {
        let (c, d) = (outcome(&t, to, mode), outcome(&g, to, mode));
        assert!(c.is_err(), "{to} {mode}: the CPU accepted");
        assert_eq!(d, c, "{to} {mode}");
    }
    let e = outcome(&g, DType::Int32, CastMode::Checked).unwrap_err();
    assert!(e.contains("element 5000003"), "{e}");
}

#[test]
fn cuda_every_dtype_round_trips_blocking_and_non_blocking_on_a_gpu() {
    if !gpu() {
        return;
    }
    let mut failures = Vec::new();
    for dt in cuda_dtypes() {
        // Large enough for the non-blocking path's pinned staging buffers (64 KiB and more).
        let bytes: Vec<u8> = values(dt)
            .into_iter()
            .cycle()
            .take(dt.storage_bytes(320_000).unwrap())
            .collect();
        let n = 320_000;
        let t = Tensor::from_bytes(&bytes, dt, &[n]).unwrap();
        for non_blocking in [false, true] {
            let opts = ToOptions {
                non_blocking,
                ..Default::default()
            };
            let back = t
                .to_with(Device::Cuda(0), opts)
                .and_then(|g| g.to_with(Device::Cpu, opts))
                .and_then(|c| c.to_bytes());
            if back.as_ref().ok() != Some(&bytes) {
                failures.push(format!(
                    "{dt} (non_blocking {non_blocking}): {:?}",
                    back.err()
                ));
            }
        }
    }
    assert_none(failures, "round trips");
}

#[test]
fn cuda_large_transfers_through_the_staging_buffers_are_intact_on_a_gpu() {
    // Above 1 MiB, transfers cycle through the backend's page-locked buffers (16 MiB chunks, the
    // host filling one while the bus empties another), and a CPU tensor moved to the GPU as a
    // narrower dtype is cast on its way into them. 13,000,001 float32 values: four chunks and a
    // partial one, an odd element count, both directions, blocking and not.
    if !gpu() {
        return;
    }
    let n = 13_000_001;
    let mut state = 0x1234_5678_9ABC_DEF1u64;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            f32::from_bits((state >> 32) as u32)
        })
        .collect();
    let t = Tensor::from_vec(v, &[n]).unwrap();
    let bytes = t.to_bytes().unwrap();
    for non_blocking in [false, true] {
        let opts = ToOptions {
            non_blocking,
            ..Default::default()
        };
        let g = t.to_with(Device::Cuda(0), opts).unwrap();
        let back = g.to_with(Device::Cpu, opts).unwrap();
        assert!(
            back.to_bytes().unwrap() == bytes,
            "round trip (non_blocking {non_blocking})"
        );
        for to in [
            DType::BFloat16,
            DType::Float16,
            DType::UInt8,
            DType::Float8E4M3Fn,
        ] {
            for mode in [CastMode::Torch, CastMode::Saturate] {
                let o = ToOptions { mode, ..opts };
                let cpu = t.to_with(to, o).unwrap().to_bytes().unwrap();
                let moved = t.to_with((Device::Cuda(0), to), o).unwrap();
                assert!(
                    moved.to_bytes().unwrap() == cpu,
                    "float32 cpu -> (cuda, {to}) {mode}"
                );
            }
        }
    }
    // A Checked cast on the way over fails on the element the CPU names, in a later chunk.
    let mut v = vec![0.5f32; n];
    v[9_000_017] = f32::NAN;
    v[12_000_000] = f32::INFINITY;
    let t = Tensor::from_vec(v, &[n]).unwrap();
    let o = ToOptions {
        mode: CastMode::Checked,
        ..Default::default()
    };
    let cpu = t.to_with(DType::Int16, o).unwrap_err().to_string();
    let gpu = t
        .to_with((Device::Cuda(0), DType::Int16), o)
        .unwrap_err()
        .to_string();
    assert_eq!(gpu, cpu);
    assert!(cpu.contains("element 9000017"), "{cpu}");
}

#[test]
fn cuda_out_of_memory_is_a_clean_error_and_the_device_stays_usable() {
    if !gpu() {
        return;
    }
    // Far more than any card has, with plain (not managed) allocations.
    let e = Tensor::zeros(&[1 << 44], DType::UInt8, Device::Cuda(0)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("OUT_OF_MEMORY"), "{text}");
    let t = Tensor::from_vec(vec![1.0f32, 2.5], &[2]).unwrap();
    let back = t
        .to((Device::Cuda(0), DType::BFloat16))
        .and_then(|g| g.to(DType::Float32))
        .and_then(|g| g.to_vec::<f32>())
        .unwrap();
    assert_eq!(back, [1.0, 2.5]);
}

#[test]
fn cuda_transfers_round_trip_and_non_blocking_reads_wait_on_a_gpu() {
    if !gpu() {
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
    if cuda_available() {
        eprintln!("SKIPPED: this machine has CUDA; the no-CUDA errors are checked elsewhere");
        return;
    }
    let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    for r in [
        t.to(Device::Cuda(0)).map(|_| ()),
        t.to("cuda:1").map(|_| ()),
        Tensor::zeros(&[2], DType::Float32, Device::Cuda(0)).map(|_| ()),
        dtcast::device::cuda::precompile(
            0,
            &[(DType::Float32, DType::BFloat16, CastMode::Checked)],
        )
        .map(|_| ()),
    ] {
        let e = r.unwrap_err().to_string();
        assert!(e.starts_with("CUDA is not available: "), "{e}");
    }
}

/// One NVRTC program: its kernels, the architecture it is compiled for, and whether NVRTC
/// generates its code or only runs its front end.
struct Program {
    kernels: Vec<(DType, DType, CastMode)>,
    arch: Option<&'static str>,
    code: bool,
}

/// Whether NVRTC is installed here (a SKIPPED note if not); panics if it fails on a kernel.
fn nvrtc() -> bool {
    use dtcast::device::cuda::compile_kernel;
    match compile_kernel(DType::Float32, DType::BFloat16, CastMode::Torch, None) {
        Ok(()) => true,
        Err(e @ dtcast::TensorError::CudaUnavailable(_)) => {
            eprintln!("SKIPPED: {e}");
            false
        }
        Err(e) => panic!("{e}"),
    }
}

/// Every pair and mode in one program per source dtype, each kernel under its own name; with
/// code generated for all of them if `all_code`, else through NVRTC's front end (parsed,
/// instantiated, type-checked) plus code for a sample in which every source and every
/// destination appears in every mode: source `i` → destination `i + j` in the `j`-th mode.
/// On sm_89 and later the float16 and float8 casts use the GPU's conversion instructions (inline
/// PTX that only an architecture that has them assembles): those are compiled for Hopper too,
/// with code.
fn nvrtc_programs(all_code: bool) -> Vec<Program> {
    let hardware = [DType::Float16, DType::Float8E4M3Fn, DType::Float8E5M2];
    let dtypes = cuda_dtypes();
    let mut programs = Vec::new();
    for (i, &from) in dtypes.iter().enumerate() {
        let all = dtypes
            .iter()
            .flat_map(|&to| CastMode::ALL.map(|mode| (from, to, mode)))
            .collect();
        programs.push(Program {
            kernels: all,
            arch: None,
            code: all_code,
        });
        if !all_code {
            let sample = CastMode::ALL
                .into_iter()
                .enumerate()
                .map(|(j, mode)| (from, dtypes[(i + j) % dtypes.len()], mode))
                .collect();
            programs.push(Program {
                kernels: sample,
                arch: None,
                code: true,
            });
        }
        let hopper: Vec<_> = dtypes
            .iter()
            .filter(|to| hardware.contains(&from) || hardware.contains(to))
            .map(|&to| (from, to, CastMode::Torch))
            .collect();
        if !hopper.is_empty() {
            programs.push(Program {
                kernels: hopper,
                arch: Some("compute_90"),
                code: true,
            });
        }
    }
    programs
}

/// Compiles `programs`, spread over the machine's cores; NVRTC's errors.
fn compile_programs(programs: &[Program]) -> Vec<String> {
    use dtcast::device::cuda::{check_kernel_syntax, compile_kernels};
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut failures = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(p) = programs.get(k) else {
                            return failures;
                        };
                        let compiled = if p.code {
                            compile_kernels(&p.kernels, p.arch)
                        } else {
                            check_kernel_syntax(&p.kernels, p.arch)
                        };
                        if let Err(e) = compiled {
                            failures.push(e.to_string());
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("an NVRTC thread panicked"))
            .collect()
    })
}

#[test]
fn nvrtc_compiles_every_kernel_where_nvrtc_is_installed() {
    // NVRTC needs no GPU, only libnvrtc: where it is present, every pair and mode must compile.
    // Its front end takes every kernel in 7 s on 2 cores; generating the code of all of them
    // took 218 s (the test below), so here only a sample's is generated.
    if nvrtc() {
        assert_none(compile_programs(&nvrtc_programs(false)), "NVRTC programs");
    }
}

#[test]
#[ignore = "NVRTC's code for every kernel: about 4 minutes on 2 cores; CI runs the front end on every kernel and generates a sample"]
fn nvrtc_generates_code_for_every_kernel_where_nvrtc_is_installed() {
    if nvrtc() {
        assert_none(compile_programs(&nvrtc_programs(true)), "NVRTC programs");
    }
}

/// Runs `tests/cuda_host/float32_paths.cpp` with `args`; its report, or `None` without a compiler.
fn float32_paths(args: &[&str]) -> Option<(bool, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("float32_paths");
    compile_cpp(
        &root.join("tests/cuda_host/float32_paths.cpp"),
        &exe,
        Build::Optimised,
    )?;
    let out = Command::new(&exe).args(args).output().unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

#[test]
fn cuda_float32_fast_paths_equal_the_double_rules_when_run_on_the_host() {
    // The kernels round float32 values in float32 and integer arithmetic (`encode_f32`) and decode
    // narrow formats in float32 (`decode_f32`); the double-precision rules they replace are the
    // line-by-line port of the CPU's. Both must give the same code for every format and overflow
    // rule: here on every top-16-bit pattern at the rounding points, and a stride through the rest.
    if let Some((ok, report)) = float32_paths(&[]) {
        assert!(ok, "{report}");
    }
}

#[test]
#[ignore = "2^32 float32 values x 16 formats x 3 overflow rules; about an hour on 2 cores"]
fn cuda_float32_fast_paths_equal_the_double_rules_for_every_float32() {
    if let Some((ok, report)) = float32_paths(&["all"]) {
        assert!(ok, "{report}");
    }
}

#[test]
fn cuda_check_source_matches_the_cpu_rules_when_run_on_the_host() {
    // The Checked / Exact check kernels (`DTCAST_CHECK` lines, limits included) compiled as C++ on
    // the host: their verdict on every element must be the CPU rules' verdict.
    use dtcast::device::cuda::{check_line, tile_elements};
    let dir = tempfile::tempdir().unwrap();
    let mut src = String::from(
        "#include \"kernels.cu\"\n#include <cstdio>\n#include <cstring>\n#include <vector>\n\
         #define DTCAST_CHECK(S, D, EXACT, Q16, QBF, QF8, QPB, QML, ...) \
         static u64 run(const u8* src, u64 n, u8* out) { Quirks q = {Q16, QBF, QF8, QPB, QML}; Limits l = {__VA_ARGS__}; \
         std::vector<u8> codes(n * S::SIZE + 1); \
         if (S::BITS < 8) unpack<S::BITS < 8 ? S::BITS : 1>(src, codes.data(), (int)n); else if (n) memcpy(codes.data(), src, n * S::SIZE); \
         for (u64 i = 0; i < n; ++i) out[i] = check_one<S, D, EXACT>(codes.data(), (int)i, q, l) ? 1 : 0; \
         for (u64 t = 0; t < tiles<S, D>(n); ++t) { u64 bad = check_tile<S, D, EXACT>(src, t, n, q, l); \
         out[n + t] = bad < n ? (u8)(bad - t * Tile<S, D>::ELEMS) : 0xFF; } return n + tiles<S, D>(n); }\n",
    );
    let mut jobs = Vec::new();
    for from in cuda_dtypes() {
        for to in cuda_dtypes() {
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
    src.push_str("typedef u64 (*Run)(const u8*, u64, u8*);\nstatic const Run TABLE[] = {");
    for k in 0..jobs.len() {
        src.push_str(&format!("c{k}::run,"));
    }
    src.push_str(
        "};\nint main() { std::vector<u8> in, out; for (;;) { unsigned char h[6]; if (fread(h, 1, 6, stdin) != 6) return 0; \
         unsigned k = h[0] | (h[1] << 8); u64 n = (u64)h[2] | ((u64)h[3] << 8) | ((u64)h[4] << 16) | ((u64)h[5] << 24); \
         out.resize(n + n); \
         u64 bytes; if (fread(&bytes, 8, 1, stdin) != 1) return 3; in.resize(bytes + 1); if (bytes && fread(in.data(), 1, bytes, stdin) != bytes) return 4; \
         u64 len = TABLE[k](in.data(), n, out.data()); fwrite(out.data(), 1, len, stdout); } }\n",
    );
    let cpp = dir.path().join("checks.cpp");
    std::fs::write(&cpp, src).unwrap();
    let exe = dir.path().join("checks");
    if compile_cpp(&cpp, &exe, Build::Quick).is_none() {
        return;
    }
    let values: Vec<Vec<u8>> = DType::ALL.iter().map(|d| values(*d)).collect();
    let mut input = Vec::new();
    let mut expected = Vec::new();
    let mut counts = Vec::new();
    for (k, (from, to, exact)) in jobs.iter().enumerate() {
        let all = &values[from.index()];
        let n = job_elements(all, *from, *to);
        let v = &all[..from.storage_bytes(n).unwrap()];
        input.extend((k as u16).to_le_bytes());
        input.extend(&(n as u32).to_le_bytes());
        input.extend((v.len() as u64).to_le_bytes());
        input.extend(v);
        let mode = if *exact {
            CastMode::Exact
        } else {
            CastMode::Checked
        };
        // Each element's verdict from the CPU: eight copies of it (whole bytes for any width) cast
        // alone.
        let mut elements = vec![0u8; n * unit(*from)];
        if from.is_packed() {
            dtcast::dtype::packing::unpack(*from, v, &mut elements).unwrap();
        } else {
            elements.copy_from_slice(v);
        }
        let mut verdicts: Vec<u8> = elements
            .chunks(unit(*from))
            .map(|e| {
                let copies: Vec<u8> = e.repeat(8);
                let mut group = vec![0u8; from.storage_bytes(8).unwrap()];
                if from.is_packed() {
                    dtcast::dtype::packing::pack(*from, &copies, &mut group).unwrap();
                } else {
                    group = copies;
                }
                let mut out = vec![0u8; to.storage_bytes(8).unwrap()];
                u8::from(cast_reference(&group, *from, &mut out, *to, mode).is_ok())
            })
            .collect();
        // Then per tile (as the GPU threads take them): the offset of its first refused element,
        // 0xFF when none.
        let firsts: Vec<u8> = verdicts
            .chunks(tile_elements(*from, *to))
            .map(|c| c.iter().position(|&ok| ok == 0).map_or(0xFF, |i| i as u8))
            .collect();
        verdicts.extend(firsts);
        expected.push(verdicts);
        counts.push(n);
    }
    let stdout = run_harness(&exe, input);
    let mut at = 0;
    let mut failures = Vec::new();
    for (((from, to, exact), want), &n) in jobs.iter().zip(&expected).zip(&counts) {
        let got = &stdout[at..at + want.len()];
        at += want.len();
        if let Some(i) = got.iter().zip(want).position(|(g, w)| g != w) {
            failures.push(if i < n {
                format!(
                    "{from} -> {to} (exact {exact}) element {i}: cuda says ok={}, cpu ok={}",
                    got[i], want[i]
                )
            } else {
                format!(
                    "{from} -> {to} (exact {exact}) tile {}: cuda's first refused offset {:#x}, cpu's {:#x}",
                    i - n,
                    got[i],
                    want[i]
                )
            });
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

#[test]
fn cuda_generated_sources_match_the_dtype_table() {
    // The per-dtype parts of the kernels (formats and lanes) are written from the dtype table; the
    // copies beside kernels.cu, which the host-side tests compile, must be what the generator
    // writes today.
    use dtcast::device::cuda::{formats_cuh, lanes_cuh};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("device/src/cuda");
    for (file, text) in [("formats.cuh", formats_cuh()), ("lanes.cuh", lanes_cuh())] {
        let path = dir.join(file);
        if std::env::var_os("DTCAST_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == text,
            "device/src/cuda/{file} is not what dtcast-device writes from the dtype table; run \
             `DTCAST_BLESS=1 cargo test -p dtcast-tests --test cuda generated` and commit it"
        );
    }
}
