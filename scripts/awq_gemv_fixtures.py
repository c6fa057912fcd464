#!/usr/bin/env python3
"""AutoAWQ GEMV checkpoints (`version: gemv`), packed by AutoAWQ 0.2.9's own
`WQLinear_GEMV.from_linear`: `qweight` int32 `[out, in/8]` (codes in order along the input),
`qzeros` int32 `[out, w]` and `scales` float16 `[out, 8w]`, each row's groups padded to `w`
words by `calculate_zeros_width` (groups of 128: none beyond a word; of 64: to two words; of 32:
to four).

AutoAWQ has no CPU dequantization of GEMV (its kernels are CUDA), so the reference is its
dequantization of the same weight packed in its GEMM layout: `WQLinear_GEMM.from_linear` with
the same scales and zero points, then `awq.utils.packing_utils.dequantize_gemm` (float16),
transposed to `[out, in]`. The dense weight is made from random codes, zero points and scales
as `float16(s × (q − z))`, so that both packers recover the codes exactly; the script checks
that they do and that the reference equals that product.

    python3 scripts/awq_gemv_fixtures.py tests/fixtures/intq_added

Made with torch 2.15.0 and autoawq 0.2.9 (`pip install --no-deps autoawq==0.2.9`: its CUDA
extension and calibration dependencies are not needed), seed 1.
"""
import importlib.metadata
import json
import os
import sys

import importlib.util
import types

import torch

# `import awq` runs its package __init__, which imports the calibration code (and `datasets`);
# the packers and packing_utils need none of it, so the package is entered without it.
_awq = types.ModuleType("awq")
_awq.__path__ = importlib.util.find_spec("awq").submodule_search_locations
sys.modules["awq"] = _awq

from awq.modules.linear.gemm import WQLinear_GEMM  # noqa: E402
from awq.modules.linear.gemv import WQLinear_GEMV  # noqa: E402
from awq.utils.packing_utils import dequantize_gemm  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

CASES = [
    # name, group size, [in, out]
    ("awq_gemv_g128", 128, (384, 96)),
    ("awq_gemv_g64", 64, (640, 64)),
    ("awq_gemv_g32", 32, (256, 64)),
]

PREFIX = "model.layers.0.mlp.up_proj"


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, autoawq {importlib.metadata.version('autoawq')}")
    for name, group, (n_in, n_out) in CASES:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        groups = n_in // group
        q = torch.randint(0, 16, (n_out, n_in), dtype=torch.int32)
        z = torch.randint(0, 16, (n_out, groups), dtype=torch.int32)
        s = (torch.rand(n_out, groups) * 0.01 + 0.001).to(torch.float16)
        each = lambda t: t.repeat_interleave(group, dim=1)
        product = (each(s).float() * (q - each(z)).float()).half()
        linear = torch.nn.Linear(n_in, n_out, bias=False, dtype=torch.float16)
        with torch.no_grad():
            linear.weight.copy_(product)
        gemv = WQLinear_GEMV.from_linear(linear, 4, group, scales=s, zeros=z.half())
        words = gemv.qweight
        codes = torch.stack([(words >> (4 * i)) & 15 for i in range(8)], dim=-1)
        assert torch.equal(codes.reshape(n_out, n_in), q), name
        gemm = WQLinear_GEMM.from_linear(linear, 4, group, scales=s.t().contiguous(),
                                         zeros=z.t().contiguous().half())
        dense = dequantize_gemm(gemm.qweight, gemm.qzeros, gemm.scales, 4, group)
        dense = dense.t().contiguous()
        assert dense.dtype == torch.float16
        assert torch.equal(dense.view(torch.int16), product.view(torch.int16)), name
        tensors = {f"{PREFIX}.{k}": getattr(gemv, k).contiguous()
                   for k in ("qweight", "qzeros", "scales")}
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        save_file({f"{PREFIX}.weight": dense}, os.path.join(d, "reference.safetensors"),
                  metadata={"format": "pt"})
        qc = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
              "version": "gemv"}
        config = {"model_type": "llama", "torch_dtype": "float16", "quantization_config": qc}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        print(name, {k: tuple(v.shape) for k, v in tensors.items()})


if __name__ == "__main__":
    main()
