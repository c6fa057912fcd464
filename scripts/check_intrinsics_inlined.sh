#!/usr/bin/env bash
# Fails where a function of dtcast-cast or dtcast-quant calls an x86 intrinsic
# (`core::core_arch::x86::...`) out of line, in the binary given (default: the dev build of the
# CLI, where both crates are optimised: Cargo.toml's profiles).
#
# Why: the kernels are generic `#[inline(always)]` functions compiled into one `#[target_feature]`
# loop per instruction set. Anything in them that the inliner may leave out of line — a closure, a
# provided trait method without `#[inline(always)]`, a function called from one without the
# target features — is compiled for the baseline, where no AVX2 or AVX-512 intrinsic inlines: each
# one becomes a call, and the kernel runs 10-25x slower while every test still passes (float32 ->
# uint8 in Saturate mode 0.4 Gelem/s on AVX2; bfloat16/float16 -> float6 1.7 on AVX-512). Only the
# symbol table shows it (dtcast-quant's AVX-512 float8 dequantization without AVX512_BF16 was one,
# inlined into a function without target features).
set -euo pipefail
bin=${1:-target/debug/dtcast}
if [ "$(uname -m)" != x86_64 ]; then
  echo "SKIPPED: not an x86-64 machine"; exit 0
fi
if ! command -v objdump >/dev/null; then
  echo "SKIPPED: objdump (binutils) not found"; exit 0
fi
# Each function of the disassembly, and the intrinsics it calls.
calls=$(objdump -d --no-show-raw-insn -C "$bin" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ /, "", fn) }
  /call.*<core::core_arch::x86/ && fn ~ /dtcast_(cast|quant)::/ { n[fn]++ }
  END { for (f in n) print n[f] " intrinsic calls in " f }')
if [ -n "$calls" ]; then
  echo "x86 intrinsics called out of line (compiled without the loop's target features):"
  echo "$calls" | sort -rn
  exit 1
fi
echo "dtcast-cast, dtcast-quant: every x86 intrinsic inlined ($bin)"
