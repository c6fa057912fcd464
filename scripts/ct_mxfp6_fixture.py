#!/usr/bin/env python3
"""A compressed-tensors MXFP6 checkpoint (`mxfp6-pack-quantized`, the `MXFP6A16` preset: float6
E2M3 codes, four in three bytes, one E8M0 scale (uint8) per 32 elements), written and
dequantized by compressed-tensors 0.20.

Two Linear modules of a tiny bfloat16 model under `MXFP6A16`, quantized by
`apply_quantization_config` + `ModelCompressor.compress_model` from random weights and scales
that are powers of two from 2^-133 to 2^20: every code, saturation at 7.5, products that fall
into bfloat16's subnormals, and the bytes compressed-tensors' scale compressor stores for scales
under 2^-127 (`127 + floor(log2)` made uint8 wraps: 2^-128 is stored as 255, which reads back
as 2^128, infinity). `config.json`
has the `quantization_config` `update_config` writes; `reference.safetensors` is
`ModelCompressor.decompress_model`'s result (bfloat16).

    python3 scripts/ct_mxfp6_fixture.py OUT_DIR

Made with torch 2.15.0 and compressed-tensors 0.20.0, seed 1.
"""
import json
import os
import sys

import compressed_tensors
import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (
    QuantizationConfig,
    apply_quantization_config,
    preset_name_to_scheme,
)
from safetensors.torch import save_file


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up_proj = torch.nn.Linear(128, 96, bias=False, dtype=torch.bfloat16)
        self.down_proj = torch.nn.Linear(96, 64, bias=False, dtype=torch.bfloat16)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = Mlp()


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, compressed-tensors {compressed_tensors.__version__}")
    model = Model()
    scheme = preset_name_to_scheme("MXFP6A16", ["Linear"])
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}))
    with torch.no_grad():
        for m in model.mlp.children():
            n_out, n_in = m.weight.shape
            exponent = torch.randint(-133, 21, (n_out, n_in // 32))
            scale = torch.exp2(exponent.float())
            m.weight_scale.copy_(scale.to(m.weight_scale.dtype))
            # Elements within about ±9.5 of a scale: every code, and some past 7.5 (saturated).
            x = torch.randn(n_out, n_in) * 3.2 * scale.repeat_interleave(32, dim=1)
            m.weight.copy_(x.to(torch.bfloat16))
    compressor = ModelCompressor.from_pretrained_model(model)
    compressor.compress_model(model)
    os.makedirs(out, exist_ok=True)
    state = {f"model.layers.0.{k}": v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "torch_dtype": "bfloat16"}, f)
    compressor.update_config(out)
    compressor.decompress_model(model)
    dense = {f"model.layers.0.mlp.{n}.weight": m.weight.detach().contiguous()
             for n, m in model.mlp.named_children()}
    save_file(dense, os.path.join(out, "reference.safetensors"), metadata={"format": "pt"})
    for k, v in sorted(state.items()):
        print(k, v.dtype, tuple(v.shape))


if __name__ == "__main__":
    main()
