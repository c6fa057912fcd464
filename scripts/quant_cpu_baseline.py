#!/usr/bin/env python3
"""Dequantizing on the CPU, side by side: the reference pipelines in torch against dtcast.

One 16384 x 4096 bfloat16 weight (about N(0, 0.02), seeded) is quantized by `dtcast convert
--quantize` for each scheme; each round then times, on that same file's tensors:
  - compressed-tensors' own decompressor (the one vLLM's loader uses) for fp8-block, mxfp4, nvfp4,
  - DeepSeek-V3's rule in torch (`weight.float() * scale_inv` expanded over 128 x 128 blocks, then
    bf16) on the DeepSeek layout,
  - `dtcast bench --scheme ... --json` (the same shape, 2 threads, into a reused buffer),
rounds interleaved (a slow spell hits every side); the median per side is printed, with each
side's output checked equal to dtcast's (`dtcast convert --dtype bf16`) once.

Needs torch, safetensors and compressed-tensors (not the test suite).
Usage: quant_cpu_baseline.py DTCAST_BINARY [ROUNDS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import safetensors.torch as st
import torch
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

ROWS, COLS = 16384, 4096
NAME = "model.layers.0.mlp.up_proj"


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def ct_decompress(qdir):
    """compressed-tensors' compressor for the directory's format, and the weight's tensors."""
    qc = json.load(open(os.path.join(qdir, "config.json")))["quantization_config"]
    group = qc["config_groups"]["group_0"]
    compressor = BaseCompressor.get_value_from_registry(group["format"])
    scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]))
    tensors = st.load_file(os.path.join(qdir, "model.safetensors"))
    local = {k[len(NAME) + 1:]: v for k, v in tensors.items() if k.startswith(NAME + ".")}
    return lambda: compressor.decompress(local, scheme)["weight"].to(torch.bfloat16)


def deepseek(qfile):
    """DeepSeek-V3's dequantization rule in torch, on its layout."""
    t = st.load_file(qfile)
    w, s = t[NAME + ".weight"], t[NAME + ".weight_scale_inv"]

    def rule():
        expanded = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[: w.shape[0], : w.shape[1]]
        return (w.to(torch.float32) * expanded).to(torch.bfloat16)

    return rule


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    dtcast = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torch.set_num_threads(2)
    g = torch.Generator().manual_seed(0)
    weight = (torch.randn(ROWS, COLS, generator=g) * 0.02).to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        dense = os.path.join(tmp, "dense")
        os.mkdir(dense)
        st.save_file({NAME + ".weight": weight}, os.path.join(dense, "model.safetensors"))
        json.dump({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"},
                  open(os.path.join(dense, "config.json"), "w"))
        sides = {}
        for scheme, fmt in [("fp8-block", "compressed-tensors"), ("mxfp4", "compressed-tensors"),
                            ("nvfp4", "compressed-tensors"), ("fp8-block", "deepseek")]:
            q, d = os.path.join(tmp, f"q-{scheme}-{fmt}"), os.path.join(tmp, f"d-{scheme}-{fmt}")
            run(dtcast, "convert", dense, "-o", q, "--quantize", scheme, "--format", fmt)
            run(dtcast, "convert", q, "-o", d, "--dtype", "bf16")
            ours = st.load_file(os.path.join(d, "model.safetensors"))[NAME + ".weight"]
            f = ct_decompress(q) if fmt == "compressed-tensors" else deepseek(os.path.join(q, "model.safetensors"))
            same = torch.equal(f().view(torch.int16), ours.view(torch.int16))
            label = f"{fmt} {scheme}"
            print(f"{label}: reference output equal to dtcast's: {same}")
            sides[label] = (f, scheme, [], [])
        for _ in range(rounds):
            for label, (f, scheme, ref, ours) in sides.items():
                ref.append(timed(f)[0])
                out = run(dtcast, "bench", "--scheme", scheme, "--elements", str(ROWS * COLS),
                          "--threads", "2", "--repeat", "1", "--json")
                for line in out.splitlines():
                    r = json.loads(line)
                    if r["direction"] == "dequantize":
                        ours.append(ROWS * COLS / (r["gelem_per_s"] * 1e9))
        med = lambda v: sorted(v)[len(v) // 2]
        print(f"{ROWS}x{COLS} bf16 out, 2 threads each, median of {rounds} interleaved rounds")
        for label, (_, _, ref, ours) in sides.items():
            a, b = med(ref), med(ours)
            print(f"{label:<32} reference {a * 1e3:8.1f} ms   dtcast {b * 1e3:6.1f} ms   {a / b:6.1f}x")


if __name__ == "__main__":
    main()
