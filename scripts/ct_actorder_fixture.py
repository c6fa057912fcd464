#!/usr/bin/env python3
"""A compressed-tensors act-order (`actorder: group`) checkpoint, `weight_g_idx` stored beside
`weight_packed`, made and dequantized by compressed-tensors 0.18.0 — the last release with group
act-order (0.19 removed it; checkpoints made with it are on the Hub and vLLM loads them).

Two modules of a tiny model under one W4A16 scheme with zero points (int4, groups of 32,
asymmetric, `actorder: group`), quantized with random scales and zero points by
`apply_quantization_config` + `ModelCompressor.compress_model`, `pack-quantized`:
- `q_proj`: `weight_g_idx` as GPTQ's act-order writes it (a random permutation of the columns,
  each group `group_size` of them: `perm.argsort() // group_size`);
- `o_proj`: `weight_g_idx` left as `apply_quantization_config` initialises it (all -1: never
  calibrated), which compressed-tensors reads as column order.
`reference.safetensors` is `ModelCompressor.decompress_model`'s result (bfloat16); `config.json`
has the `quantization_config` `update_config` writes.

    PYTHONPATH=<compressed-tensors 0.18.0> python3 scripts/ct_actorder_fixture.py OUT_DIR

Made with torch 2.15.0 and compressed-tensors 0.18.0 (`pip install --no-deps --target DIR
compressed-tensors==0.18.0`), seed 1.
"""
import json
import os
import sys

import compressed_tensors
import torch
from compressed_tensors.compressors import ModelCompressor
from compressed_tensors.quantization import (
    QuantizationArgs,
    QuantizationConfig,
    QuantizationScheme,
    apply_quantization_config,
)
from safetensors.torch import save_file

GROUP = 32


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(192, 64, bias=False, dtype=torch.bfloat16)
        self.o_proj = torch.nn.Linear(128, 96, bias=False, dtype=torch.bfloat16)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attention()


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, compressed-tensors {compressed_tensors.__version__}")
    model = Model()
    args = QuantizationArgs(num_bits=4, type="int", symmetric=False, strategy="group",
                            group_size=GROUP, actorder="group")
    scheme = QuantizationScheme(targets=["Linear"], weights=args)
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}))
    with torch.no_grad():
        for name, m in model.self_attn.named_children():
            n_out, n_in = m.weight.shape
            m.weight.copy_(torch.randn(n_out, n_in) * 0.02)
            m.weight_scale.copy_(torch.rand(n_out, n_in // GROUP) * 0.004 + 0.001)
            m.weight_zero_point.copy_(torch.randint(-8, 8, (n_out, n_in // GROUP)))
            if name == "q_proj":
                m.weight_g_idx.copy_(torch.randperm(n_in).argsort() // GROUP)
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="pack-quantized")
    compressor.compress_model(model)
    os.makedirs(out, exist_ok=True)
    state = {f"model.layers.0.{k}": v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "torch_dtype": "bfloat16"}, f)
    compressor.update_config(out)
    compressor.decompress_model(model)
    dense = {f"model.layers.0.self_attn.{n}.weight": m.weight.detach().contiguous()
             for n, m in model.self_attn.named_children()}
    save_file(dense, os.path.join(out, "reference.safetensors"), metadata={"format": "pt"})
    for k, v in sorted(state.items()):
        print(k, v.dtype, tuple(v.shape))


if __name__ == "__main__":
    main()
