//! Running the CUDA kernels' source on the host: C++ harnesses that include `kernels.cu` (and
//! `scaled.cu`), compiled with the machine's C++ compiler and fed jobs on stdin.

use std::io::Write;
use std::process::{Command, Stdio};

/// How [`compile_cpp`] builds a harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// `-O0`: for harnesses that run a few thousand elements per pair. Compiling every pair's
    /// kernel took 23 s so, against 101 s with `-O1`, on the 2-core CI machine.
    Quick,
    /// `-O1`: for harnesses that loop over billions of values.
    Optimised,
}

/// Compiles a C++ file that includes `kernels.cu` into an executable, with whichever C++ compiler
/// the machine has; `None` (after a SKIPPED note) when it has none. A compiler that rejects the
/// source fails the test with its messages.
pub fn compile_cpp(cpp: &std::path::Path, exe: &std::path::Path, build: Build) -> Option<()> {
    let level = match build {
        Build::Quick => "-O0",
        Build::Optimised => "-O1",
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let Some(output) = ["c++", "g++", "clang++"].iter().find_map(|cxx| {
        Command::new(cxx)
            .args([level, "-std=c++14", "-I"])
            .arg(root.join("device/src/cuda"))
            .arg("-o")
            .arg(exe)
            .arg(cpp)
            .output()
            .ok()
    }) else {
        eprintln!("SKIPPED: no C++ compiler (c++, g++, clang++) to run kernels.cu on the host");
        return None;
    };
    assert!(
        output.status.success(),
        "kernels.cu does not compile as C++ ({}):\n{}",
        cpp.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(())
}

/// Runs a harness with `input` on stdin; its stdout.
pub fn run_harness(exe: &std::path::Path, input: Vec<u8>) -> Vec<u8> {
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

/// A pair's `dtcast_cast::Quirks` as the harnesses take them: the fields as bits 0..4, in order.
pub fn quirk_bits(from: dtcast::DType, to: dtcast::DType) -> u8 {
    let q = dtcast::cast::Quirks::of(from, to);
    [
        q.f16_to_f32_nan,
        q.f32_to_bf16_nan,
        q.float8_nan_to_int_zero,
        q.part_bits,
        q.ml,
    ]
    .iter()
    .enumerate()
    .fold(0u8, |bits, (i, &on)| bits | (u8::from(on) << i))
}
