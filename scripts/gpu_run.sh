#!/usr/bin/env bash
# Runs the CUDA checks and benchmarks on a machine with an NVIDIA GPU, from binaries that
# scripts/gpu_pack.sh built into .gpu/ (no Rust toolchain needed there). Logs go to $OUT (or
# gpu-logs/). Steps: env, tests (the CUDA test suites and the other suites that touch devices),
# quant (the scaled formats on the GPU: dtcast bench --scheme --device cuda:0, which also compares
# their bytes with the CPU's), convert (scripts/cuda_convert_check.sh), bench (dtcast bench
# --device cuda:0 and torch's .to()). The default order puts first what has run least on a GPU:
# `scripts/gpu_run.sh env quant tests` fits one 10-minute device call (its timeouts add up to
# 570 s; logs are written as they come, so a call cut short still returns what ran).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-logs}
mkdir -p "$out"
steps=${*:-env quant tests convert bench}
elements=${ELEMENTS:-134217728}
# The test executables read fixtures (and run dtcast-child) at the paths they were built at.
root=$(cat .gpu/ROOT)
if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"; fi
if [ -e .gpu/bins.tar.xz ] && [ ! -e .gpu/dtcast ]; then tar -xJf .gpu/bins.tar.xz -C .gpu; fi
mkdir -p target/release && cp .gpu/dtcast .gpu/dtcast-child target/release/
# cudarc (built for CUDA 12.8 names) looks for libnvrtc.so, libnvrtc.so.12, ...; a CUDA 13
# machine may have libnvrtc.so.13 alone: point a libnvrtc.so at the newest one found.
if ! ldconfig -p | grep -q 'libnvrtc\.so \|libnvrtc\.so\.12 '; then
  lib=$(find / -xdev -name 'libnvrtc.so.1[0-9]*' -not -path '*/proc/*' 2>/dev/null | sort -V | tail -1)
  if [ -n "$lib" ]; then
    mkdir -p /tmp/nvrtc-link && ln -sf "$lib" /tmp/nvrtc-link/libnvrtc.so
    export LD_LIBRARY_PATH=/tmp/nvrtc-link:$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "NVRTC: using $lib"
  fi
fi
for step in $steps; do
  echo "=== $step"
  case $step in
    env)
      { nvidia-smi; nvcc --version 2>&1 | tail -2; ldconfig -p | grep -E 'libcuda\.so|libnvrtc'; nproc; free -g
        python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
        .gpu/dtcast devices; } 2>&1 | tee "$out/env.log" ;;
    tests)
      # NVRTC compiling every kernel is checked in CI without a GPU; here the GPU tests compile
      # and run every kernel anyway. On an H200 (16 cores), 2026-11-27: device, layer, cli and
      # checkpoint took seconds; test-cuda's pair-mode tests 3 to 6 minutes each, all at once
      # (NVRTC compiling every pair and mode); every float32 pattern did not finish in 6 minutes
      # sharing the machine with them, in 1 GiB slices (now 16 MiB ones: its CPU side takes
      # about 40 s on 2 cores; it prints its progress). So the scaled kernels' tests run first,
      # then every float32 pattern alone, then the rest of test-cuda. Their timeouts
      # (QUANT_TIMEOUT, FLOAT32_TIMEOUT, CUDA_TIMEOUT: 90 + 130 + 200 s) and the quant step's
      # (QUANT_BENCH_TIMEOUT and QUANT_F16_TIMEOUT, 120 + 30 s) keep `env quant tests` within
      # one 10-minute device call.
      for t in device layer cli checkpoint; do
        ( timeout 150 ".gpu/test-$t" --test-threads 4 > "$out/test-$t.log" 2>&1; echo "rc=$?" >> "$out/test-$t.log" ) &
      done
      echo "--- test-cuda_quant" | tee -a "$out/tests.log"
      timeout "${QUANT_TIMEOUT:-90}" .gpu/test-cuda_quant --nocapture --test-threads 16 2>&1 | tail -n 30 | tee -a "$out/tests.log"
      echo "--- test-cuda: every float32 pattern" | tee -a "$out/tests.log"
      timeout "${FLOAT32_TIMEOUT:-130}" .gpu/test-cuda --nocapture --exact cuda_every_float32_pattern_rounds_as_on_the_cpu_on_a_gpu 2>&1 | tee -a "$out/tests.log" | grep -E '^test |test result|panicked|float32 patterns'
      echo "--- test-cuda: the rest" | tee -a "$out/tests.log"
      timeout "${CUDA_TIMEOUT:-200}" .gpu/test-cuda --nocapture --test-threads 16 --skip nvrtc_compiles --skip cuda_every_float32_pattern 2>&1 | tee -a "$out/tests.log" | grep -E '^test |test result|panicked'
      wait
      for t in device layer cli checkpoint; do
        echo "--- test-$t" | tee -a "$out/tests.log"; tail -n 30 "$out/test-$t.log" | tee -a "$out/tests.log"
      done ;;
    quant)
      # Every scheme quantized and dequantized on the GPU, each result compared with the CPU's
      # bytes (the bench fails on a difference), beside device copies of as many bytes.
      timeout "${QUANT_BENCH_TIMEOUT:-120}" .gpu/dtcast bench --scheme fp8-tensor,fp8-channel,fp8-block,mxfp8,mxfp4,nvfp4 --device cuda:0 --elements "$elements" --json 2>&1 | tee "$out/quant.json"
      # float16 weights (compressed-tensors' rules, float16 arithmetic), a quarter of the size.
      timeout "${QUANT_F16_TIMEOUT:-30}" .gpu/dtcast bench --scheme fp8-tensor,fp8-block,mxfp4,nvfp4 --quantize-from float16 --device cuda:0 --elements "$((elements / 4))" --json 2>&1 | tee "$out/quant-float16.json" ;;
    convert)
      timeout 300 scripts/cuda_convert_check.sh .gpu/dtcast 2>&1 | tee "$out/convert.log" ;;
    bench)
      timeout 200 .gpu/dtcast bench --device cuda:0 --elements "$elements" --transfers 2>&1 | tee "$out/bench.log"
      timeout 200 python3 scripts/torch_cuda_bench.py --elements "$elements" --transfers 2>&1 | tee "$out/torch.log"
      timeout 200 .gpu/dtcast bench --device cuda:0 --elements "$elements" --json 2>&1 | tee "$out/bench.json" ;;
    *) echo "unknown step $step" ;;
  esac
done
