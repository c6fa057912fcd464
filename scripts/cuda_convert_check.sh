#!/usr/bin/env bash
# `dtcast convert --device cuda:0` against the CPU conversion, on a machine with a GPU: every
# target dtype and mode gives the same bytes (or the same error). Needs python3 with torch and
# safetensors to write the input checkpoint (special values, subnormals, odd lengths, 0-dim and
# empty tensors, and one tensor larger than a conversion chunk).
#
#     scripts/cuda_convert_check.sh [path/to/dtcast]
set -euo pipefail
dtcast=${1:-target/release/dtcast}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$dir/in.safetensors" <<'PY'
import sys, torch
from safetensors.torch import save_file
g = torch.Generator().manual_seed(7)
special = torch.tensor([0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-45, 1e-40, 65504.0, 65520.0,
                        448.0, 464.0, 57344.0, 3.4e38, -3.4e38, 1.5, -2.5, 0.5 + 2**-12, 1e-8, -1e-8])
w = torch.randn(4099, 1029, generator=g) * 3          # 16.9 MB: several 8 MiB chunks
w.view(-1)[: special.numel()] = special
t = {
    "big.f32": w,
    "wide.f32": torch.randn(257, 33, generator=g) * 1e4,
    "half.f16": (torch.randn(1000, 7, generator=g) * 100).half(),
    "brain.bf16": (torch.randn(3, 333, generator=g) * 1e20).bfloat16(),
    "double.f64": torch.cat([torch.randn(777, generator=g, dtype=torch.float64) * 1e30, special.double()]),
    "scalar.f32": torch.tensor(2.75),
    "empty.f32": torch.zeros(0, 5),
    "ints.i32": torch.randint(-2**31, 2**31 - 1, (513,), generator=g, dtype=torch.int32),
    "bytes.u8": torch.randint(0, 255, (99,), generator=g, dtype=torch.uint8),
    "flags.bool": torch.rand(77, generator=g) > 0.5,
    "f8.e4m3": (torch.randn(301, generator=g) * 50).to(torch.float8_e4m3fn),
}
save_file(t, sys.argv[1], metadata={"made_by": "cuda_convert_check.sh"})
PY
checks=0
failed=0
for dtype in ${DTYPES:-bf16 f16 f64 float8_e4m3fn int32}; do
  for mode in torch saturate checked exact; do
    for all in "" "--all"; do
      set +e
      "$dtcast" convert "$dir/in.safetensors" -o "$dir/cpu.safetensors" --dtype "$dtype" --mode "$mode" $all --force >/dev/null 2>"$dir/cpu.err"
      c=$?
      "$dtcast" convert "$dir/in.safetensors" -o "$dir/gpu.safetensors" --dtype "$dtype" --mode "$mode" $all --force --device cuda:0 >/dev/null 2>"$dir/gpu.err"
      g=$?
      set -e
      checks=$((checks + 1))
      what="--dtype $dtype --mode $mode $all"
      if [ $c -ne $g ]; then
        echo "DIFFER ($what): exit cpu $c, gpu $g: $(cat "$dir/cpu.err") | $(cat "$dir/gpu.err")"; failed=$((failed + 1))
      elif [ $c -eq 0 ] && ! cmp -s "$dir/cpu.safetensors" "$dir/gpu.safetensors"; then
        echo "DIFFER ($what): outputs differ"; failed=$((failed + 1))
      elif [ $c -ne 0 ] && ! cmp -s "$dir/cpu.err" "$dir/gpu.err"; then
        echo "DIFFER ($what): errors differ: $(cat "$dir/cpu.err") | $(cat "$dir/gpu.err")"; failed=$((failed + 1))
      else
        echo "same ($what): exit $c $( [ $c -eq 0 ] && sha256sum < "$dir/gpu.safetensors" | cut -c1-16 || head -c 100 "$dir/gpu.err")"
      fi
      rm -f "$dir/cpu.safetensors" "$dir/gpu.safetensors"
    done
  done
done
echo "convert --device cuda:0 against cpu: $((checks - failed)) of $checks identical"
[ "$failed" -eq 0 ]
