#!/usr/bin/env python3
"""Writes the per-tensor cost benchmark's inputs (docs/performance.md, "Many small tensors"):
`many.safetensors`, 200,000 float32 tensors of 2 elements each, and `few.safetensors`, the same
1.6 MB of data as one tensor. Plain Python 3, no packages.

    python3 scripts/many_tensors.py /tmp/p12
    /usr/bin/time -v target/release/dtcast convert /tmp/p12/many.safetensors \
        -o /tmp/p12/many-bf16.safetensors --dtype bf16 --force
"""
import json
import os
import struct
import sys


def write(path, header, data_len):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(b"\0" * data_len)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    n = 200_000
    header = {}
    for i in range(n):
        name = f"model.layers.{i // 1000}.block.{i % 1000}.weight"
        header[name] = {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
    write(os.path.join(out, "many.safetensors"), header, 8 * n)
    one = {"w": {"dtype": "F32", "shape": [n * 2 // 10, 10], "data_offsets": [0, 8 * n]}}
    write(os.path.join(out, "few.safetensors"), one, 8 * n)


if __name__ == "__main__":
    main()
