#!/usr/bin/env python3
"""bitsandbytes 4-bit cases the shared references lack: other block sizes (32, 128, 256, 4096,
the last one partial), float16 weights, and widths that are not powers of two. Each case is a
directory of `model.safetensors` (one quantized 2-D weight serialized as transformers does:
`weight`, `weight.absmax`, `weight.quant_map`, `weight.quant_state.bitsandbytes__<type>`, and
for double quantization `weight.nested_absmax`, `weight.nested_quant_map`), `config.json`, and
`reference.safetensors`: bitsandbytes' dequantization of it by its generic implementation
(`backends.default.ops._dequantize_4bit_compute`, after `dequantize_blockwise` of a nested
absmax, as `dequantize_4bit` does): the semantics of its CUDA kernel, blocks over the flattened
weight. (Its CPU backend's AVX-512 kernel, which `dequantize_4bit` runs for blocks under 2048 on
an AVX-512 CPU, counts blocks within each row: where a row is not whole blocks — 320 columns in
blocks of 128 — it reads other blocks' absmax than the quantizer wrote, 54,027 of 61,440
elements differing here; it falls back to the generic one for odd widths and blocks of 2048 and
more.)

    python3 scripts/bnb_blocksize_fixtures.py tests/fixtures/intq_added

Made with torch 2.15.0 and bitsandbytes 0.50.2 (printed), seed 1.
"""
import json
import os
import sys

import bitsandbytes
import bitsandbytes.functional as F
import torch
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
from bitsandbytes.backends.utils import _get_4bit_code
from safetensors.torch import save_file

CASES = [
    # name, quant type, block size, double quantization, dtype, shape
    ("bnb_nf4_b32", "nf4", 32, False, torch.bfloat16, (96, 160)),
    ("bnb_nf4_b128_dq", "nf4", 128, True, torch.bfloat16, (192, 320)),
    ("bnb_fp4_b256_dq", "fp4", 256, True, torch.float16, (128, 384)),
    ("bnb_nf4_b4096_dq_f16", "nf4", 4096, True, torch.float16, (100, 300)),
]


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, bitsandbytes {bitsandbytes.__version__}")
    for name, kind, blocksize, dq, dtype, shape in CASES:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        w = (torch.randn(shape) * 0.05).to(dtype)
        q, state = F.quantize_4bit(w, blocksize=blocksize, quant_type=kind, compress_statistics=dq)
        p = "model.layers.0.mlp.down_proj.weight"
        tensors = {p: q}
        for k, v in state.as_dict(packed=True).items():
            tensors[f"{p}.{k}"] = v
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        absmax = state.absmax
        if state.nested:
            absmax = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
        dense = _dequantize_4bit_compute(q.view(torch.uint8).reshape(-1), absmax.float(),
                                         _get_4bit_code(kind, q.device), blocksize, state.shape, dtype)
        save_file({p: dense}, os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
        config = {"model_type": "llama", "torch_dtype": str(dtype).removeprefix("torch."),
                  "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True,
                                          "bnb_4bit_quant_type": kind,
                                          "bnb_4bit_use_double_quant": dq,
                                          "bnb_4bit_compute_dtype": str(dtype).removeprefix("torch.")}}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        print(name, tuple(q.shape), state.blocksize, state.dtype)


if __name__ == "__main__":
    main()
