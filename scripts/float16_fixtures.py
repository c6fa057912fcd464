#!/usr/bin/env python3
"""Writes tests/fixtures/scaled/quantize_float16.json.gz: compressed-tensors (0.20) quantizing
float16 weights, which it does in float16 arithmetic (scales rounded to float16, `x / scale` in
float16; NVFP4's global scale `2688 / amax` in float16 too, 1 where that overflows).

The same procedure as the shared reference's `quantize.json.gz` (`tests/fixtures/scaled/`, and
`scripts/compressed_tensors_random.py`): llm-compressor's min-max observer re-created (min and max
over each scale's elements, then compressed-tensors' `calculate_qparams` and `generate_gparam`),
then the scheme's own compressor (`compress`), called without a zero point; `decompress` of those
tensors gives `decompressed` (compressed-tensors' dense tensor, in its own dtype). Inputs where
compressed-tensors raises are recorded with `ok: false` and the error.

No NaN among the inputs: which NaN torch writes for a scale whose elements hold one depends on
which of its kernels ran vectorised (the number of scales), so no fixed bytes can be recorded.

Format: as `quantize.json.gz` — {versions, seed, inputs: {name: T}, cases: [{id, scheme, input,
reference, format, quantization_args, ok, outputs: {name: T} | error}]}, T = {dtype, shape, hex}.

Needs torch and compressed-tensors 0.20 (not the test suite). Run from the repository root:
    python3 scripts/float16_fixtures.py
"""
import gzip
import json
import os
import sys

import torch
import compressed_tensors
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compressed_tensors_random import observe  # noqa: E402

OUT = "tests/fixtures/scaled/quantize_float16.json.gz"
SEED = 16

FP8 = dict(num_bits=8, type="float", symmetric=True, dynamic=False)
SCHEMES = {
    "ct_fp8_tensor": ("naive-quantized", dict(FP8, strategy="tensor")),
    "ct_fp8_channel": ("naive-quantized", dict(FP8, strategy="channel")),
    "ct_fp8_block": ("naive-quantized", dict(FP8, strategy="block", block_structure=[128, 128])),
    "ct_mxfp8": ("mxfp8-quantized",
                 dict(FP8, strategy="group", group_size=32, scale_dtype=torch.uint8)),
    "ct_mxfp4": ("mxfp4-pack-quantized",
                 dict(FP8, num_bits=4, strategy="group", group_size=32, scale_dtype=torch.uint8)),
    "ct_nvfp4": ("nvfp4-pack-quantized",
                 dict(FP8, num_bits=4, strategy="tensor_group", group_size=16,
                      scale_dtype=torch.float8_e4m3fn)),
}


def inputs(gen):
    """float16 weights: ordinary, small (NVFP4's global scale overflows float16), outliers and
    values near float16's largest, zeros, inf, subnormals, rounding ties, scale boundaries."""
    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    x = {}
    x["randn_odd"] = randn(130, 200) * 0.05
    x["randn_small"] = randn(7, 64)
    x["weight_sq"] = randn(256, 256) * 0.02
    # amax below 2688 / 65504: `2688 / amax` overflows float16, and the global scale is 1.
    x["small_amax"] = randn(16, 64) * 0.005
    o = randn(64, 128)
    o[torch.rand(64, 128, generator=gen) < 0.01] *= 100.0
    o[:, 7] *= 50.0
    o[3, 3] = 60000.0
    o[5, 9] = -65504.0
    x["outliers"] = o
    z = randn(160, 256) * 0.1
    z[:128, :128] = 0.0
    z[140, 0:32] = 0.0
    z[141, 32:64] = -0.0
    z[142, 64:80] = 0.0
    x["zero_blocks"] = z
    n = randn(8, 64)
    n[1, 5] = float("inf")
    n[4, 40] = -float("inf")
    n[6, 0:16] = float("inf")
    x["infinite"] = n
    t = randn(8, 64)
    for r, m in enumerate([1e-5, 1e-6, 6e-8, 1e-3, 2.0 ** -14, 3e-5, 1.0, 1e-7]):
        t[r] *= m
    x["tiny"] = t
    l = randn(8, 64)
    for r, m in enumerate([1e4, 3e4, 6e4, 1e3, 4096.0, 2e4, 500.0, 5e4]):
        l[r] = (l[r] / l[r].abs().max()) * m
    x["large"] = l
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5,
                         5.0], dtype=torch.float64)
    pick = torch.randint(0, len(grid), (8, 64), generator=gen)
    sign = torch.where(torch.rand(8, 64, generator=gen) < 0.5, -1.0, 1.0)
    ties = grid[pick] * sign * 2.0 ** torch.arange(-6, 2, dtype=torch.float64).reshape(8, 1)
    ties[7] = torch.round(randn(64) * 200) / 2
    x["ties"] = ties
    # Each group's amax with mantissa 1.0 ... 1.999 (where MX's power of two rounds up).
    b = randn(4, 512).abs() * 0.01
    for g in range(64):
        b[g % 4, (g // 4) * 32 + 3] = (1.0 + g / 64.0) * 2.0 ** (g % 7 - 3)
    x["amax_boundary"] = b
    return {k: v.to(torch.float16) for k, v in x.items()}


def tensor(t):
    t = t.contiguous()
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
            "hex": t.view(torch.uint8).numpy().tobytes().hex()}


def main():
    gen = torch.Generator().manual_seed(SEED)
    weights = inputs(gen)
    cases = []
    for scheme, (fmt, kwargs) in SCHEMES.items():
        args = QuantizationArgs(**kwargs)
        qscheme = QuantizationScheme(targets=["Linear"], weights=args)
        compressor = BaseCompressor.get_value_from_registry(fmt)
        for name, w in weights.items():
            case = {"id": f"{scheme}/{name}_float16", "scheme": scheme,
                    "input": f"{name}_float16",
                    "reference": f"compressed_tensors {type(compressor).__name__}.compress / "
                                 ".decompress; scales from calculate_qparams (+generate_gparam) "
                                 "on min-max",
                    "format": fmt,
                    "quantization_args": json.loads(args.model_dump_json(exclude_none=True))}
            try:
                scale, _, gs = observe(w, args)
                local = {"weight": w, "weight_scale": scale}
                if gs is not None:
                    local["weight_global_scale"] = gs
                compressed = compressor.compress(local, qscheme)
                dense = compressor.decompress(dict(compressed), qscheme)["weight"]
            except Exception as e:  # noqa: BLE001 - the reference's refusal is the case
                case.update(ok=False, error=f"{type(e).__name__}: {e}")
                cases.append(case)
                continue
            outputs = {k: tensor(v) for k, v in compressed.items()}
            outputs["decompressed"] = tensor(dense)
            case.update(ok=True, outputs=outputs)
            cases.append(case)
    doc = {"versions": {"torch": torch.__version__,
                        "compressed_tensors": compressed_tensors.__version__},
           "seed": SEED,
           "inputs": {f"{k}_float16": tensor(v) for k, v in weights.items()},
           "cases": cases}
    with gzip.open(OUT, "wt") as f:
        json.dump(doc, f)
    ok = sum(c["ok"] for c in cases)
    print(f"{OUT}: {len(cases)} cases, {ok} quantized, {len(cases) - ok} refused")


if __name__ == "__main__":
    main()
