#!/usr/bin/env python3
"""Proof with the real tool: torch (2.15, through safetensors 0.8) loads dtcast's F4 output.

Writes a float32 checkpoint with safetensors, converts it with `dtcast convert --dtype
float4_e2m1fn`, loads the result with `safetensors.torch.load_file`, and checks that torch sees
`float4_e2m1fn_x2` tensors of torch's byte-counting shape whose nibbles (low nibble first) are the
float4 values nearest the inputs (ties to even, saturating at ±6) — computed here independently.

Needs torch, numpy and safetensors on PYTHONPATH (not the test suite).
Usage: torch_load_f4.py DTCAST_BINARY
"""
import os
import subprocess
import sys
import tempfile

import safetensors.torch as st
import torch

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def nearest(x):
    """float4_e2m1fn of x: nearest magnitude, ties to the even code, saturating; sign kept."""
    mag = min(abs(x), 6.0)
    best = min(range(8), key=lambda c: (abs(E2M1[c] - mag), c % 2))
    return -E2M1[best] if (x < 0 or (x == 0 and str(x).startswith("-"))) else E2M1[best]


def main():
    dtcast = sys.argv[1]
    values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -6.0, 2.9, 0.26, 100.0, -0.0, 5.1,
              0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
        st.save_file({"w": torch.tensor(values, dtype=torch.float32).reshape(3, 8)}, src)
        subprocess.run([dtcast, "convert", src, "-o", out, "--dtype", "float4_e2m1fn"], check=True)
        w = st.load_file(out)["w"]
        assert w.dtype == torch.float4_e2m1fn_x2, w.dtype
        assert tuple(w.shape) == (3, 4), w.shape  # torch counts bytes: two float4 per element
        got = []
        for byte in w.view(torch.uint8).flatten().tolist():
            for nib in (byte & 0xF, byte >> 4):
                v = E2M1[nib & 7]
                got.append(-v if nib & 8 else v)
        want = [nearest(x) for x in values]
        bad = [(x, g, e) for x, g, e in zip(values, got, want) if g != e or str(g) != str(e)]
        print(f"{len(values)} values: torch reads dtcast's F4 as {w.dtype} {tuple(w.shape)}; "
              f"{len(values) - len(bad)} equal the nearest float4")
        for x, g, e in bad:
            print(f"  {x}: read {g}, nearest {e}")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
