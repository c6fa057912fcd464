#!/usr/bin/env python3
"""Writes one large integer-quantized checkpoint for measuring dtcast's memory while it
dequantizes (`/usr/bin/time -v dtcast convert FILE -o OUT --dtype bf16`): a single linear
weight of OUT x IN int4 codes in the layout named (`ct`: compressed-tensors pack-quantized
W4A16, symmetric, groups of 128, bfloat16 scales; `gptq`: GPTQ v1 4-bit, groups of 128,
act-order g_idx, float16 scales; `awq`: AutoAWQ GEMM, groups of 128), with pseudo-random codes
and plausible scales. The values are not a model's; the sizes are. Needs only numpy (2.x).

    python3 scripts/intq_rss.py ct OUT.safetensors [OUT_FEATURES] [IN_FEATURES]
"""
import json
import struct
import sys

import numpy as np


def write(path, tensors):
    """safetensors: a header, then each tensor's bytes (written from generators, chunk by chunk)."""
    header, offset = {}, 0
    for name, dtype, shape, nbytes, _ in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, nbytes, chunks in tensors:
            written = 0
            for chunk in chunks():
                f.write(chunk)
                written += len(chunk)
            assert written == nbytes


def random_words(n, seed, chunk=1 << 24):
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        yield rng.integers(0, 1 << 32, min(chunk, n - start), dtype=np.uint32).tobytes()


def scales(n, dtype):
    v = np.full(n, 0.01, dtype=np.float32)
    if dtype == "BF16":
        return (v.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    return v.astype(np.float16).tobytes()


def main():
    layout, path = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 32768
    cols = int(sys.argv[4]) if len(sys.argv) > 4 else 65536
    groups = cols // 128
    p = "model.layers.0.mlp.down_proj"
    if layout == "ct":
        tensors = [
            (f"{p}.weight_packed", "I32", [rows, cols // 8], rows * cols // 2, lambda: random_words(rows * cols // 8, 1)),
            (f"{p}.weight_scale", "BF16", [rows, groups], rows * groups * 2, lambda: [scales(rows * groups, "BF16")]),
            (f"{p}.weight_shape", "I64", [2], 16, lambda: [np.array([rows, cols], dtype=np.int64).tobytes()]),
        ]
    elif layout == "gptq":
        g_idx = np.random.default_rng(2).permutation(cols).astype(np.int32) // 128
        tensors = [
            (f"{p}.qweight", "I32", [cols // 8, rows], rows * cols // 2, lambda: random_words(rows * cols // 8, 1)),
            (f"{p}.qzeros", "I32", [groups, rows // 8], groups * rows // 2, lambda: random_words(groups * rows // 8, 3)),
            (f"{p}.scales", "F16", [groups, rows], groups * rows * 2, lambda: [scales(groups * rows, "F16")]),
            (f"{p}.g_idx", "I32", [cols], cols * 4, lambda: [g_idx.tobytes()]),
        ]
    elif layout == "awq":
        tensors = [
            (f"{p}.qweight", "I32", [cols, rows // 8], rows * cols // 2, lambda: random_words(rows * cols // 8, 1)),
            (f"{p}.qzeros", "I32", [groups, rows // 8], groups * rows // 2, lambda: random_words(groups * rows // 8, 3)),
            (f"{p}.scales", "F16", [groups, rows], groups * rows * 2, lambda: [scales(groups * rows, "F16")]),
        ]
    else:
        sys.exit(f"layout {layout!r}: ct, gptq or awq")
    write(path, tensors)


if __name__ == "__main__":
    main()
