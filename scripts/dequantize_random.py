#!/usr/bin/env python3
"""Held-out comparison with the real tools: random quantized checkpoints dequantized by dtcast and
by each layout's own code must give the same bfloat16 (or float16) bytes.

For each layout (compressed-tensors FP8 per channel and per block, MXFP8, MXFP4, NVFP4; DeepSeek-V3
block FP8; gpt-oss MXFP4), ROUNDS checkpoints of CASES weights each are written with random
element bytes (every float8 and float4 code, NaN codes included) and random scales, under the
`config.json` of the layout's reference checkpoint in `tests/fixtures/scaled/checkpoints/` (and
the two compressed-tensors FP8 layouts again with float16 scales, as a float16 model's are,
dequantized into float16 as compressed-tensors' `decompress` returns them). In
half the rounds the scales are plausible (positive, finite, powers of two from 2^-40 to 2^20
times a random mantissa; E8M0 bytes 87..147); in the other half they are random bits of the scale
dtype (negative, zero, subnormal, inf, NaN; every E8M0 byte). `dtcast convert --dtype bf16`
dequantizes each; the references are compressed-tensors' `Compressor.decompress`, DeepSeek's
`weight_dequant` rule in torch (`x.float() * s`, per 128x128 block, then bfloat16) and
transformers' `convert_moe_packed_tensors` (gpt-oss, transposed as its experts hold it). Every
weight must be equal bit for bit, except in one NaN rule, counted apart: torch's bfloat16 product
writes a NaN as 0xFFFF in its vectorised loop, as dtcast does for every such NaN, but as 0x7FC0
in the scalar remainder of each inner row (the last `cols % 32` elements, with its AVX-512 and its
AVX2 kernels alike) and of each thread's share, and everywhere without its SIMD kernels: bits
that depend on the machine. (Its float16 product keeps a NaN operand's bits, as dtcast does,
but where both are NaN it returns the scale's in one loop and the element's in another: a scale
per row takes the element's, dtcast the scale's, by its rule `arith::mul`.)

Needs torch, safetensors, compressed-tensors and transformers (not the test suite).
Usage: dequantize_random.py DTCAST_BINARY FIXTURES_DIR [ROUNDS] [SEED]
       (FIXTURES_DIR: tests/fixtures/scaled/checkpoints)
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

CASES = 12
CT = ["ct_fp8_channel", "ct_fp8_block", "ct_mxfp8", "ct_mxfp4", "ct_nvfp4"]


def bits(gen, shape, dtype):
    """Random bytes viewed as `dtype`."""
    size = torch.empty(0, dtype=dtype).element_size()
    n = 1
    for d in shape:
        n *= d
    raw = torch.randint(0, 256, (n * size,), generator=gen, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def scales(gen, shape, dtype, plausible):
    """Scales of `dtype`: plausible values, or random bits."""
    if dtype == torch.uint8:
        if plausible:
            return torch.randint(87, 148, shape, generator=gen, dtype=torch.uint8)
        return torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    if not plausible:
        return bits(gen, shape, dtype)
    mantissa = 1 + torch.rand(shape, generator=gen, dtype=torch.float64)
    power = 2.0 ** torch.randint(-40, 21, shape, generator=gen)
    if dtype == torch.float8_e4m3fn:
        # Its own range: 2^-9 .. 448.
        return (mantissa * 2.0 ** torch.randint(-9, 8, shape, generator=gen)).clamp(max=448).to(dtype)
    if dtype == torch.float16:
        # Its own range: 2^-20 .. 2^11 (subnormal below 2^-14).
        return (mantissa * 2.0 ** torch.randint(-20, 11, shape, generator=gen)).to(dtype)
    return (mantissa * power).to(dtype)


def shape_of(gen, cols_unit):
    rows = int(torch.randint(1, 400, (1,), generator=gen))
    cols = cols_unit * int(torch.randint(1, 400 // cols_unit + 2, (1,), generator=gen))
    return rows, cols


def ct_weights(gen, layout, args, plausible, fp8_scale=torch.bfloat16):
    """One compressed-tensors module's tensors (local names) for `layout` (FP8 scales in
    `fp8_scale`: compressed-tensors keeps them in the weight's dtype)."""
    if layout in ("ct_fp8_channel", "ct_fp8_block"):
        rows, cols = shape_of(gen, 1)
        t = {"weight": bits(gen, (rows, cols), torch.float8_e4m3fn)}
        if layout == "ct_fp8_channel":
            t["weight_scale"] = scales(gen, (rows, 1), fp8_scale, plausible)
        else:
            shape = (-(-rows // 128), -(-cols // 128))
            t["weight_scale"] = scales(gen, shape, fp8_scale, plausible)
        return t
    group = args.group_size
    rows, cols = shape_of(gen, group)
    if layout == "ct_mxfp8":
        t = {"weight": bits(gen, (rows, cols), torch.float8_e4m3fn)}
    else:
        t = {"weight_packed": bits(gen, (rows, cols // 2), torch.uint8)}
    scale_dtype = torch.float8_e4m3fn if layout == "ct_nvfp4" else torch.uint8
    t["weight_scale"] = scales(gen, (rows, cols // group), scale_dtype, plausible)
    if layout == "ct_nvfp4":
        t["weight_global_scale"] = scales(gen, (1,), torch.float32, plausible)
    return t


def dequantized(dtcast, tmp, config, tensors, out_dtype="bf16"):
    """dtcast's dense tensors (`out_dtype`) for a checkpoint of `tensors` under `config`, or its
    error."""
    src, out = os.path.join(tmp, "q"), os.path.join(tmp, "d")
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    os.mkdir(src)
    st.save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(src, "model.safetensors"))
    json.dump(config, open(os.path.join(src, "config.json"), "w"))
    done = subprocess.run([dtcast, "convert", src, "-o", out, "--dtype", out_dtype],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        return done.stderr.strip()
    return st.load_file(os.path.join(out, "model.safetensors"))


def same(a, b):
    return a is not None and a.shape == b.shape and torch.equal(a.view(torch.int16), b.view(torch.int16))


def main():
    dtcast, fixtures = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    gen = torch.Generator().manual_seed(seed)
    failures = compared = refused = nan_bits = 0

    def report(layout, name, ours, theirs, plausible):
        nonlocal failures, compared, nan_bits
        compared += 1
        if ours is not None and ours.shape == theirs.shape and not same(ours, theirs):
            differ = ours.view(torch.int16) != theirs.view(torch.int16)
            if bool((ours[differ].isnan() & theirs[differ].isnan()).all()):
                # Both NaN: torch's bfloat16 product writes 0xFFFF in its vectorised loop and
                # 0x7FC0 in the scalar remainder of each inner row and thread's range.
                nan_bits += 1
                return
        if not same(ours, theirs):
            failures += 1
            detail = "missing" if ours is None else f"shapes {tuple(ours.shape)}/{tuple(theirs.shape)}"
            if ours is not None and ours.shape == theirs.shape:
                a, b = ours.view(torch.int16).flatten(), theirs.view(torch.int16).flatten()
                at = (a != b).nonzero().flatten()
                detail = (f"{len(at)} of {a.numel()} differ, first at {int(at[0])}: ours "
                          f"{int(a[at[0]]) & 0xFFFF:#06x}, theirs {int(b[at[0]]) & 0xFFFF:#06x}")
            print(f"{layout} ({'plausible' if plausible else 'random bits'}) {name}: {detail}")

    with tempfile.TemporaryDirectory() as tmp:
        # `_f16`: FP8 scales in float16 (a float16 model's), dequantized into float16, what
        # compressed-tensors' `decompress` returns for them (its product in float16).
        f16 = ["ct_fp8_channel_f16", "ct_fp8_block_f16"]
        for layout in CT + f16 + ["deepseek_fp8_block", "gptoss_mxfp4"]:
            base = layout.removesuffix("_f16")
            config = json.load(open(os.path.join(fixtures, base, "config.json")))
            for r in range(rounds):
                plausible = r % 2 == 0
                tensors, expected = {}, {}
                for i in range(CASES):
                    prefix = f"model.layers.{i}.mlp.down_proj"
                    if base in CT:
                        group = config["quantization_config"]["config_groups"]["group_0"]
                        args = QuantizationArgs(**group["weights"])
                        qscheme = QuantizationScheme(targets=group["targets"], weights=args)
                        compressor = BaseCompressor.get_value_from_registry(group["format"])
                        fp8_scale = torch.float16 if layout in f16 else torch.bfloat16
                        local = ct_weights(gen, base, args, plausible, fp8_scale)
                        theirs = compressor.decompress(dict(local), qscheme)["weight"]
                        if layout in f16:
                            assert theirs.dtype == torch.float16
                        expected[f"{prefix}.weight"] = theirs.to(
                            torch.float16 if layout in f16 else torch.bfloat16)
                    elif layout == "deepseek_fp8_block":
                        rows, cols = shape_of(gen, 1)
                        w = bits(gen, (rows, cols), torch.float8_e4m3fn)
                        s = scales(gen, (-(-rows // 128), -(-cols // 128)), torch.float32, plausible)
                        full = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:rows, :cols]
                        expected[f"{prefix}.weight"] = (w.float() * full).to(torch.bfloat16)
                        local = {"weight": w, "weight_scale_inv": s}
                    else:
                        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
                        prefix = f"model.layers.{i}.mlp.experts"
                        experts = int(torch.randint(1, 5, (1,), generator=gen))
                        rows = int(torch.randint(1, 200, (1,), generator=gen))
                        k = int(torch.randint(1, 8, (1,), generator=gen))
                        local = {}
                        for proj in ("gate_up_proj", "down_proj"):
                            blocks = bits(gen, (experts, rows, k, 16), torch.uint8)
                            sc = scales(gen, (experts, rows, k), torch.uint8, plausible)
                            local[f"{proj}_blocks"] = blocks
                            local[f"{proj}_scales"] = sc
                            dense = convert_moe_packed_tensors(blocks.clone(), sc.clone(),
                                                               dtype=torch.bfloat16)
                            expected[f"{prefix}.{proj}"] = dense
                    for key, t in local.items():
                        tensors[f"{prefix}.{key}"] = t
                ours = dequantized(dtcast, tmp, config, tensors, "f16" if layout in f16 else "bf16")
                if isinstance(ours, str):
                    refused += 1
                    print(f"{layout} ({'plausible' if plausible else 'random bits'}) round {r}: "
                          f"dtcast refused: {ours}")
                    continue
                for name, theirs in expected.items():
                    report(layout, name, ours.get(name), theirs, plausible)
            print(f"{layout}: done ({compared} weights compared so far, {failures} differ, "
                  f"{nan_bits} in NaN bits only, {refused} checkpoints refused)")
    print(f"{compared} weights compared, {failures} differ; {nan_bits} differ in NaN bits only "
          f"(torch's bits depend on which of its loops ran); {refused} checkpoints refused")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
