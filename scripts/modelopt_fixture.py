#!/usr/bin/env python3
"""Writes tests/fixtures/modelopt_nvfp4/ or modelopt_fp8/ with the real tool: NVIDIA ModelOpt
(0.47) quantizes a tiny two-layer Llama on CPU (`mtq.quantize` with NVFP4_DEFAULT_CFG or
FP8_DEFAULT_CFG, two calibration batches) and exports it with `export_hf_checkpoint`
(model.safetensors, config.json with its quantization_config, hf_quant_config.json,
generation_config.json); then ModelOpt's own `NVFP4QTensor.dequantize` / `FP8QTensor.dequantize`
(bfloat16) gives reference_bf16.safetensors: every quantized weight dequantized under its dense
name, its scales and input_scale gone, every other tensor as it is.

With FP8 it also writes OUT_DIR/dequantize.json: FP8QTensor.dequantize of every float8 code
(a [64, 256] tensor, each row the 256 codes in order: torch's vectorised loops) with scales
that are finite, zero, tiny, huge, infinite and NaN of either sign, into bfloat16, float16 and
float32; each case keeps the first row's outputs.

Needs torch, transformers and nvidia-modelopt (not the test suite).
Usage: modelopt_fixture.py NVFP4|FP8 OUT_DIR
"""
import json
import struct
import os
import sys

import torch
from safetensors.torch import load_file, save_file

import modelopt
import modelopt.torch.quantization as mtq
from modelopt.torch.export import export_hf_checkpoint
from modelopt.torch.quantization.qtensor.fp8_tensor import FP8QTensor
from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor
from transformers import LlamaConfig, LlamaForCausalLM


CONFIGS = {"NVFP4": mtq.NVFP4_DEFAULT_CFG, "FP8": mtq.FP8_DEFAULT_CFG}


def export(algo, out):
    torch.manual_seed(11)
    cfg = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      torch_dtype="bfloat16", architectures=["LlamaForCausalLM"])
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)

    def calibrate(m):
        for _ in range(2):
            m(torch.randint(0, 64, (2, 16)))

    model = mtq.quantize(model, CONFIGS[algo], calibrate)
    export_hf_checkpoint(model, export_dir=out)


def reference(out):
    t = load_file(os.path.join(out, "model.safetensors"))
    dense = {}
    for name, v in t.items():
        if name.endswith((".weight_scale", ".weight_scale_2", ".input_scale")):
            continue
        module = name[: -len(".weight")] if name.endswith(".weight") else None
        if module and f"{module}.weight_scale" in t and f"{module}.weight_scale_2" not in t:
            q = FP8QTensor(v.shape, torch.bfloat16, v)
            dense[name] = q.dequantize(dtype=torch.bfloat16, scale=t[f"{module}.weight_scale"])
        elif module and f"{module}.weight_scale_2" in t:
            rows, half = v.shape
            q = NVFP4QTensor(torch.Size([rows, half * 2]), torch.bfloat16, v)
            dense[name] = q.dequantize(dtype=torch.bfloat16, scale=t[f"{module}.weight_scale"],
                                       double_scale=t[f"{module}.weight_scale_2"],
                                       block_sizes={-1: 16})
        else:
            dense[name] = v
    save_file(dense, os.path.join(out, "reference_bf16.safetensors"), metadata={"format": "pt"})


def fp8_vectors(out):
    codes = torch.arange(256, dtype=torch.int32).repeat(64).to(torch.uint8).reshape(64, 256)
    weight = codes.view(torch.float8_e4m3fn)
    scales = [0.0123, -3.0, 0.0, -0.0, 1e-45, 3e38, float("inf"), float("-inf"), float("nan"),
              -float("nan")]
    cases = []
    for s in scales:
        scale = torch.tensor(s, dtype=torch.float32)
        for dtype, name in [(torch.bfloat16, "bfloat16"), (torch.float16, "float16"),
                            (torch.float32, "float32")]:
            dense = FP8QTensor(weight.shape, dtype, weight).dequantize(dtype=dtype, scale=scale)
            row = dense[0].contiguous().view(torch.uint8).numpy().tobytes()
            cases.append({"scale": struct.pack("<f", s).hex(), "out": name, "hex": row.hex()})
    meta = {"modelopt": modelopt.__version__, "torch": torch.__version__,
            "call": "FP8QTensor(shape, dtype, codes).dequantize(dtype=dtype, scale=scale)"}
    with open(os.path.join(out, "dequantize.json"), "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=0)


if __name__ == "__main__":
    export(sys.argv[1], sys.argv[2])
    reference(sys.argv[2])
    if sys.argv[1] == "FP8":
        fp8_vectors(sys.argv[2])
