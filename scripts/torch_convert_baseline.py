"""The torch pipeline `dtcast convert` is measured against (not needed by the tests).

    python scripts/torch_convert_baseline.py IN.safetensors OUT.safetensors
    python scripts/torch_convert_baseline.py --make BIG.safetensors   # 16 float32 tensors of 4096 x 4096 (1 GiB)

Loads with safetensors.torch.load_file, converts floating tensors with .to(torch.bfloat16), saves
with save_file — the usual way weights are converted in Python.
"""
import sys

import torch
from safetensors.torch import load_file, save_file

if sys.argv[1] == "--make":
    g = torch.Generator().manual_seed(0)
    tensors = {f"layers.{i}.weight": torch.randn(4096, 4096, generator=g) * 0.02 for i in range(16)}
    save_file(tensors, sys.argv[2], metadata={"format": "pt"})
else:
    src, dst = sys.argv[1], sys.argv[2]
    tensors = load_file(src)
    out = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in tensors.items()}
    save_file(out, dst, metadata={"format": "pt"})
