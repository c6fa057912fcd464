#!/usr/bin/env bash
# Builds what a GPU machine without Rust needs into .gpu/ (ignored by git): the dtcast binary and
# the release test executables of dtcast-tests (as one xz archive), plus the path they were built
# at (the fixtures' paths are compiled in). Then, on the GPU machine, from a copy of this repository with .gpu/ in it:
#     scripts/gpu_run.sh [step...]      (steps: env quant tests convert bench; all by default)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
mapfile -t exes < <(cargo test --release --locked -p dtcast-tests --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"] + " " + m["executable"])')
rm -rf .gpu && mkdir -p .gpu
cp target/release/dtcast target/release/dtcast-child .gpu/
for e in "${exes[@]}"; do
  name=${e%% *}
  case $name in cuda|cuda_quant|device|layer|cli|checkpoint) cp "${e#* }" ".gpu/test-$name" ;; esac
done
strip .gpu/* 2>/dev/null || true
# Uncompressed they are ~95 MB, over the 64 MiB a device call carries; xz takes them to ~16.
(cd .gpu && tar -I 'xz -T0' -cf bins.tar.xz -- * && find . -type f ! -name bins.tar.xz -delete)
pwd > .gpu/ROOT
du -sh .gpu
