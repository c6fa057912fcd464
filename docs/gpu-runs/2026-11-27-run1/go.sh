#!/usr/bin/env bash
# One device call: env, the CUDA tests, the other device-touching suites (in parallel), the
# convert check and a short bench. Every step bounded; logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
tar -xJf .gpu/bins.tar.xz -C .gpu && chmod +x .gpu/* scripts/*.sh
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start ))s] $*"; }
stamp env; timeout 40 scripts/gpu_run.sh env >/dev/null 2>&1; tail -n 25 "$OUT/env.log"
# Same set-up as gpu_run.sh (fixture root link, NVRTC link) for the direct runs below.
root=$(cat .gpu/ROOT); [ "$root" != "$PWD" ] && [ ! -e "$root" ] && mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"
if ! ldconfig -p | grep -q 'libnvrtc\.so \|libnvrtc\.so\.12 '; then
  lib=$(find / -xdev -name 'libnvrtc.so.1[0-9]*' -not -path '*/proc/*' 2>/dev/null | sort -V | tail -1)
  [ -n "$lib" ] && mkdir -p /tmp/nvrtc-link && ln -sf "$lib" /tmp/nvrtc-link/libnvrtc.so &&
    export LD_LIBRARY_PATH=/tmp/nvrtc-link:$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} && echo "NVRTC: $lib"
fi
for t in device layer cli checkpoint; do
  ( timeout 150 ".gpu/test-$t" --test-threads 4 > "$OUT/test-$t.log" 2>&1; echo "rc=$?" >> "$OUT/test-$t.log" ) &
done
stamp test-cuda; timeout ${CUDA_T:-170} .gpu/test-cuda --nocapture --test-threads 16 --skip nvrtc_compiles > "$OUT/test-cuda.log" 2>&1; echo "rc=$?" >> "$OUT/test-cuda.log"
grep -E "^test |test result|panicked|FAIL|failures|skip|rc=" "$OUT/test-cuda.log" | tail -n 60
stamp test-cuda_quant; timeout 90 .gpu/test-cuda_quant --nocapture --test-threads 16 > "$OUT/test-cuda_quant.log" 2>&1; echo "rc=$?" >> "$OUT/test-cuda_quant.log"
grep -E "^test |test result|panicked|FAIL|skip|rc=" "$OUT/test-cuda_quant.log" | tail -n 30
wait
for t in device layer cli checkpoint; do echo "--- $t"; grep -E "test result|panicked|FAILED|rc=" "$OUT/test-$t.log" | tail -n 8; done
stamp convert; timeout 90 scripts/cuda_convert_check.sh .gpu/dtcast > "$OUT/convert.log" 2>&1; echo "rc=$?"; tail -n 8 "$OUT/convert.log"
stamp bench; timeout 60 .gpu/dtcast bench --device cuda:0 --elements 67108864 --transfers > "$OUT/bench.log" 2>&1; tail -n 40 "$OUT/bench.log"
timeout 60 python3 scripts/torch_cuda_bench.py --elements 67108864 --transfers > "$OUT/torch.log" 2>&1; tail -n 40 "$OUT/torch.log"
stamp done
