#!/usr/bin/env python3
"""Proof with the real tool: compressed-tensors (0.20) decompresses dtcast's quantized output.

For each scheme, `dtcast convert DENSE_DIR -o Q_DIR --quantize SCHEME` quantizes a dense bf16
model directory; compressed-tensors' own compressor (chosen by the `format` dtcast wrote into
config.json) decompresses every quantized weight of Q_DIR, and the result must equal, byte for
byte, what `dtcast convert Q_DIR -o D_DIR --dtype bf16` writes. For fp8-block and fp8-channel the
quantized files must also equal compressed-tensors' own files (given as CT_DIR).

Needs torch, safetensors and compressed-tensors on PYTHONPATH (not the test suite).
Usage: compressed_tensors_check.py DTCAST_BINARY FIXTURES_DIR  (FIXTURES_DIR: tests/fixtures/scaled/checkpoints)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import safetensors.torch as st
import torch
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def main():
    dtcast, fixtures = sys.argv[1], sys.argv[2]
    failures = 0
    for layout, scheme in [("ct_fp8_block", "fp8-block"), ("ct_fp8_channel", "fp8-channel"),
                           ("ct_mxfp8", "mxfp8"), ("ct_mxfp4", "mxfp4"), ("ct_nvfp4", "nvfp4")]:
        with tempfile.TemporaryDirectory() as tmp:
            dense = os.path.join(tmp, "dense")
            os.mkdir(dense)
            shutil.copy(os.path.join(fixtures, layout, "reference_bf16.safetensors"),
                        os.path.join(dense, "model.safetensors"))
            config = json.load(open(os.path.join(fixtures, layout, "config.json")))
            config.pop("quantization_config")
            json.dump(config, open(os.path.join(dense, "config.json"), "w"))
            q, d = os.path.join(tmp, "q"), os.path.join(tmp, "d")
            run(dtcast, "convert", dense, "-o", q, "--quantize", scheme)
            run(dtcast, "convert", q, "-o", d, "--dtype", "bf16")
            qc = json.load(open(os.path.join(q, "config.json")))["quantization_config"]
            group = qc["config_groups"]["group_0"]
            compressor = BaseCompressor.get_value_from_registry(group["format"])
            qscheme = QuantizationScheme(targets=group["targets"],
                                         weights=QuantizationArgs(**group["weights"]))
            tensors = st.load_file(os.path.join(q, "model.safetensors"))
            ours = st.load_file(os.path.join(d, "model.safetensors"))
            checked = 0
            for name in sorted(ours):
                prefix = name[: -len(".weight")] if name.endswith(".weight") else None
                if prefix is None or prefix + ".weight_scale" not in tensors:
                    continue
                local = {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + ".")}
                out = compressor.decompress(local, qscheme)["weight"].to(torch.bfloat16)
                if not torch.equal(out.view(torch.int16), ours[name].view(torch.int16)):
                    failures += 1
                    print(f"{layout}: {name}: compressed-tensors and dtcast differ")
                checked += 1
            same = ""
            if scheme in ("fp8-block", "fp8-channel"):
                theirs = st.load_file(os.path.join(fixtures, layout, "model.safetensors"))
                equal = sorted(theirs) == sorted(tensors) and all(
                    torch.equal(theirs[k].view(torch.uint8), tensors[k].view(torch.uint8)) for k in theirs)
                same = "; files equal to compressed-tensors' own" if equal else "; FILES DIFFER"
                failures += 0 if equal else 1
            print(f"{scheme}: {checked} weights decompressed by compressed-tensors equal dtcast's{same}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
