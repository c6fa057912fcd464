#!/usr/bin/env python3
"""Held-out comparison with the real tools: compressed-tensors (0.20) and torchao (0.18) quantize
random and adversarial weights, and dtcast's `convert --quantize` must write the same bytes.

For each scheme (fp8-tensor, fp8-channel, fp8-block, mxfp8, mxfp4, nvfp4) and each weight dtype
(bfloat16, float32, float16), ROUNDS safetensors files of CASES weights each are drawn: shapes
from one row to 1500 x 4096, and values of one kind per weight (normal; each row its own
magnitude from 1e-40 to 1e30 — inf and zeros in float16; outliers; float4 grid points and
midpoints times a power of two per row, ties under MX scales; zeros, -0.0 and a zero group;
integers and halves, float8 ties; values near the dtype's smallest normal; for float16 also NaN
of both signs, inf and -inf among normal values). dtcast
quantizes the directory; compressed-tensors' own compressor quantizes every weight with the
qparams llm-compressor's min-max observer gives (re-created as in
`tests/fixtures/scaled/README.md`: min/max over each scale's elements, then compressed-tensors'
`calculate_qparams` and `generate_gparam`), under the scheme read from the `config.json` dtcast
wrote. compressed-tensors' decompression of dtcast's file must equal `dtcast convert --dtype`
of the dtype it returns (bfloat16; float16 for FP8 with float16 scales). Then `--scale-rounding
floor|ceil|even|rceil` for mxfp8 and mxfp4 against torchao's `to_mx` (bfloat16 and float32;
float16, which `to_mx` refuses, must be refused by dtcast too). Every output tensor must be equal
byte for byte.

As the fixtures do, compressed-tensors' compressor is called without a zero point. A model that
went through llm-compressor has one registered (0.0), and the float8 compressors add it after the
division, which turns a scaled -0.0 into +0.0: the script counts, beside the comparison, the
float8 bytes where that form differs from dtcast (-0, 0x80, against +0, 0x00) and any other
difference. (Float4 has no such difference: compressed-tensors' float4 zero is unsigned anyway.)

Needs torch, safetensors, compressed-tensors and torchao (not the test suite).
Usage: [DTYPES=float16,...] compressed_tensors_random.py DTCAST_BINARY [ROUNDS] [SEED]
"""
import json
import os
import subprocess
import sys
import tempfile

import safetensors.torch as st
import torch
from compressed_tensors.compressors.base import BaseCompressor
from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

SCHEMES = ["fp8-tensor", "fp8-channel", "fp8-block", "mxfp8", "mxfp4", "nvfp4"]
# (`DTYPES=float16` in the environment: those weight dtypes only.)
DTYPES = [getattr(torch, d) for d in os.environ.get("DTYPES", "bfloat16,float32,float16").split(",")]
CASES = 24
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def weight(gen, dtype, scheme):
    """One random weight: a shape the scheme accepts, and values of one of several kinds."""
    group = {"mxfp8": 32, "mxfp4": 32, "nvfp4": 16}.get(scheme, 1)
    # One weight in eight large enough for several bands on each thread.
    large = int(torch.randint(0, 8, (1,), generator=gen)) == 0
    rows = int(torch.randint(1, 1500 if large else 300, (1,), generator=gen))
    cols = group * int(torch.randint(1, (4096 if large else 300) // group + 2, (1,), generator=gen))
    kind = int(torch.randint(0, 8 if dtype == torch.float16 else 7, (1,), generator=gen))
    # Kind 0: normal values as drawn.
    x = torch.randn(rows, cols, generator=gen, dtype=torch.float64)
    if kind == 1:
        # Each row its own magnitude, from 1e-40 (subnormal) to 1e30.
        x *= 10.0 ** (torch.rand(rows, 1, generator=gen, dtype=torch.float64) * 70 - 40)
    elif kind == 2:
        # Outliers.
        spikes = torch.rand(rows, cols, generator=gen) < 0.01
        x[spikes] *= 1000.0
    elif kind == 3:
        # Float4 grid points and midpoints times a power of two per row: ties under MX scales.
        grid = torch.tensor(E2M1 + [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)
        pick = torch.randint(0, len(grid), (rows, cols), generator=gen)
        sign = torch.where(torch.rand(rows, cols, generator=gen) < 0.5, -1.0, 1.0)
        x = grid[pick] * sign * 2.0 ** torch.randint(-10, 10, (rows, 1), generator=gen)
    elif kind == 4:
        # Zeros, -0.0 and whole zero groups among small values.
        x[torch.rand(rows, cols, generator=gen) < 0.3] = 0.0
        x[torch.rand(rows, cols, generator=gen) < 0.1] = -0.0
        if cols >= 32:
            x[:, :32] = 0.0
    elif kind == 5:
        # Integers and halves up to 448 and beyond: float8 ties.
        x = torch.round(x * 200) / 2
    elif kind == 6:
        # Tiny: every element near the dtype's smallest normal.
        x *= float(torch.finfo(dtype).tiny) * 4
    elif kind == 7:
        # Non-finite among normal values: NaN of both signs, inf, -inf.
        specials = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf")],
                                dtype=torch.float64)
        at = torch.rand(rows, cols, generator=gen) < 0.002
        x[at] = specials[torch.randint(0, 4, (int(at.sum()),), generator=gen)]
    return x.to(dtype)


def observe(w, args):
    """llm-compressor's min-max observer: min and max per scale, then compressed-tensors' qparams."""
    strategy = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
    rows, cols = w.shape
    if strategy == "tensor":
        lo, hi = w.amin().reshape(1), w.amax().reshape(1)
    elif strategy == "channel":
        lo, hi = w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    elif strategy in ("group", "tensor_group"):
        g = w.unflatten(-1, (cols // args.group_size, args.group_size))
        lo, hi = g.amin(dim=-1), g.amax(dim=-1)
    elif strategy == "block":
        br, bc = args.block_structure
        pr, pc = -rows % br, -cols % bc
        p = torch.nn.functional.pad(w, (0, pc, 0, pr))
        b = p.unflatten(0, (-1, br)).unflatten(-1, (-1, bc)).transpose(1, 2)
        lo, hi = b.amin(dim=(-2, -1)), b.amax(dim=(-2, -1))
    else:
        raise ValueError(strategy)
    gs = None
    if strategy == "tensor_group":
        gs = generate_gparam(w.amin().reshape(1), w.amax().reshape(1))
    scale, zp = calculate_qparams(lo, hi, args, global_scale=gs)
    return scale, zp, gs


def nan_scopes(w, args):
    """Where a NaN reaches the bytes: per element, whether its scale's elements (the tensor, its
    row, its 128 x 128 block, its group) hold a NaN; and the same per scale."""
    strategy = args.strategy.value if hasattr(args.strategy, "value") else args.strategy
    rows, cols = w.shape
    nan = torch.isnan(w)
    if strategy == "tensor":
        scales = nan.any().reshape(1)
        return scales.expand(rows, cols), scales
    if strategy == "channel":
        scales = nan.any(dim=1, keepdim=True)
        return scales.expand(rows, cols), scales
    if strategy in ("group", "tensor_group"):
        k = args.group_size
        scales = nan.unflatten(-1, (cols // k, k)).any(-1)
        return scales.repeat_interleave(k, dim=1), scales
    br, bc = args.block_structure
    p = torch.nn.functional.pad(nan, (0, -cols % bc, 0, -rows % br))
    scales = p.unflatten(0, (-1, br)).unflatten(-1, (-1, bc)).any(dim=(1, 3))
    elements = scales.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:rows, :cols]
    return elements, scales


def nan_scoped(key, mine, theirs, w, args):
    """Whether every byte where `mine` and `theirs` (output `key` of weight `w`) differ comes from
    a NaN: an element or scale of a scale whose elements hold a NaN (what torch computes there
    depends on which of its kernels ran vectorised; dtcast follows its documented rule)."""
    if not torch.isnan(w).any() or key == "weight_global_scale":
        return False
    elements, scales = nan_scopes(w, args)
    if key == "weight_scale":
        mask = scales.reshape(-1).repeat_interleave(theirs.element_size())
    elif key == "weight_packed":
        mask = elements.reshape(w.shape[0], -1, 2).any(-1).reshape(-1)
    else:
        mask = elements.reshape(-1)
    a = mine.contiguous().view(torch.uint8).reshape(-1)
    b = theirs.contiguous().view(torch.uint8).reshape(-1)
    return a.shape == b.shape == mask.shape and bool(mask[a != b].all())


def main():
    dtcast = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    gen = torch.Generator().manual_seed(seed)
    failures = compared = drawn = 0
    pipeline_tensors = pipeline_other = pipeline_bytes = 0
    nan_tensors = nan_dequantized = 0
    for scheme in SCHEMES:
        for dtype in DTYPES:
            for r in range(rounds):
                with tempfile.TemporaryDirectory() as tmp:
                    dense, q = os.path.join(tmp, "dense"), os.path.join(tmp, "q")
                    os.mkdir(dense)
                    weights = {f"model.layers.{i}.mlp.down_proj.weight": weight(gen, dtype, scheme)
                               for i in range(CASES)}
                    st.save_file(weights, os.path.join(dense, "model.safetensors"))
                    json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                               "torch_dtype": str(dtype).removeprefix("torch.")},
                              open(os.path.join(dense, "config.json"), "w"))
                    done = subprocess.run([dtcast, "convert", dense, "-o", q, "--quantize", scheme],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    if done.returncode != 0:
                        print(f"{scheme} {dtype} round {r}: dtcast refused: {done.stderr.strip()}")
                        failures += 1
                        continue
                    qc = json.load(open(os.path.join(q, "config.json")))["quantization_config"]
                    group = qc["config_groups"]["group_0"]
                    compressor = BaseCompressor.get_value_from_registry(group["format"])
                    args = QuantizationArgs(**group["weights"])
                    qscheme = QuantizationScheme(targets=group["targets"], weights=args)
                    ours = st.load_file(os.path.join(q, "model.safetensors"))
                    dense_ours = {}
                    for out in ["bf16", "f16"]:
                        d = os.path.join(tmp, out)
                        subprocess.run([dtcast, "convert", q, "-o", d, "--dtype", out],
                                       check=True, stdout=subprocess.DEVNULL)
                        dense_ours[out] = st.load_file(os.path.join(d, "model.safetensors"))
                    for name, w in weights.items():
                        drawn += 1
                        prefix = name[: -len(".weight")]
                        # Dequantizing: compressed-tensors' decompress of dtcast's file.
                        local_q = {k[len(prefix) + 1:]: v for k, v in ours.items()
                                   if k.startswith(prefix + ".")}
                        back = compressor.decompress(local_q, qscheme)["weight"]
                        mine = dense_ours["f16" if back.dtype == torch.float16 else "bf16"][name]
                        compared += 1
                        back = back.to(mine.dtype)
                        if not torch.equal(back.view(torch.int16), mine.view(torch.int16)):
                            nan_bits_only = bool(((back.view(torch.int16) == mine.view(torch.int16))
                                                  | (torch.isnan(back) & torch.isnan(mine))).all())
                            if nan_bits_only:
                                nan_dequantized += 1
                                continue
                            failures += 1
                            print(f"{scheme} {dtype} round {r} {name}: dequantized bytes differ")
                        scale, zp, gs = observe(w, args)
                        local = {"weight": w, "weight_scale": scale}
                        if gs is not None:
                            local["weight_global_scale"] = gs
                        theirs = compressor.compress(local, qscheme)
                        if "weight" in theirs:
                            # The pipeline's form: llm-compressor registers a zero point (0.0)
                            # and the compressor adds it after the division.
                            piped = compressor.compress(dict(local, weight_zero_point=zp), qscheme)
                            a = ours[name].contiguous().view(torch.uint8)
                            b = piped["weight"].contiguous().view(torch.uint8)
                            if not torch.equal(a, b):
                                pipeline_tensors += 1
                                differ = a != b
                                # (Elements of a scale whose elements hold a NaN aside.)
                                if torch.isnan(w).any():
                                    differ &= ~nan_scopes(w, args)[0]
                                only_zero = bool(((a == 0x80) & (b == 0))[differ].all())
                                pipeline_other += 0 if only_zero else 1
                                pipeline_bytes += int(differ.sum())
                        for key, t in theirs.items():
                            if key == "weight_zero_point":
                                continue
                            mine = ours.get(f"{prefix}.{key}")
                            compared += 1
                            same = (mine is not None and mine.dtype == t.dtype
                                    and mine.shape == t.shape
                                    and torch.equal(mine.contiguous().view(torch.uint8),
                                                    t.contiguous().view(torch.uint8)))
                            if not same and mine is not None and mine.dtype == t.dtype \
                                    and nan_scoped(key, mine, t, w, args):
                                nan_tensors += 1
                                continue
                            if not same:
                                failures += 1
                                detail = "missing" if mine is None else (
                                    f"dtypes {mine.dtype}/{t.dtype}, shapes {tuple(mine.shape)}/"
                                    f"{tuple(t.shape)}")
                                if mine is not None and mine.shape == t.shape and mine.dtype == t.dtype:
                                    a = mine.contiguous().view(torch.uint8).flatten()
                                    b = t.contiguous().view(torch.uint8).flatten()
                                    at = (a != b).nonzero().flatten()
                                    detail = (f"{len(at)} of {a.numel()} bytes differ, first at "
                                              f"{int(at[0])}: ours {int(a[at[0]]):#04x}, "
                                              f"theirs {int(b[at[0]]):#04x}")
                                print(f"{scheme} {dtype} round {r} {name} {key}: {detail}")
                                torch.save({"weight": w, "ours": mine, "theirs": t},
                                           f"/tmp/ct_random_fail_{scheme}_{failures}.pt")
        print(f"{scheme}: done ({compared} tensors compared so far, {failures} failures)")
    # torchao's MX rules (`--scale-rounding`), stored in compressed-tensors' layout: the elements
    # and E8M0 scales must be `to_mx`'s.
    from torchao.prototype.mx_formats.mx_tensor import ScaleCalculationMode, to_mx
    for scheme, elem in [("mxfp8", torch.float8_e4m3fn), ("mxfp4", torch.float4_e2m1fn_x2)]:
        for mode in ["floor", "ceil", "even", "rceil"]:
            for dtype in DTYPES:
                for r in range(rounds):
                    with tempfile.TemporaryDirectory() as tmp:
                        dense, q = os.path.join(tmp, "dense"), os.path.join(tmp, "q")
                        os.mkdir(dense)
                        weights = {f"model.layers.{i}.mlp.down_proj.weight":
                                   weight(gen, dtype, scheme) for i in range(CASES)}
                        st.save_file(weights, os.path.join(dense, "model.safetensors"))
                        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"},
                                  open(os.path.join(dense, "config.json"), "w"))
                        done = subprocess.run(
                            [dtcast, "convert", dense, "-o", q, "--quantize", scheme,
                             "--scale-rounding", mode],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                        if dtype == torch.float16:
                            # torchao's `to_mx` refuses float16: dtcast must too, naming why.
                            compared += 1
                            if done.returncode == 0 or "refuse float16" not in done.stderr:
                                failures += 1
                                print(f"ao {scheme} {mode} float16: not refused as torchao "
                                      f"does: {done.stderr.strip()}")
                            continue
                        if done.returncode != 0:
                            print(f"{scheme} {mode} {dtype} round {r}: dtcast refused: "
                                  f"{done.stderr.strip()}")
                            failures += 1
                            continue
                        ours = st.load_file(os.path.join(q, "model.safetensors"))
                        elements = "weight" if scheme == "mxfp8" else "weight_packed"
                        for name, w in weights.items():
                            drawn += 1
                            prefix = name[: -len(".weight")]
                            scale, data = to_mx(w, elem, 32, ScaleCalculationMode[mode.upper()])
                            for key, t in [(elements, data), ("weight_scale", scale)]:
                                mine = ours.get(f"{prefix}.{key}")
                                compared += 1
                                a = t.contiguous().view(torch.uint8)
                                same = (mine is not None and mine.shape == a.shape and
                                        torch.equal(mine.contiguous().view(torch.uint8), a))
                                if not same:
                                    failures += 1
                                    print(f"ao {scheme} {mode} {dtype} round {r} {name} {key}: "
                                          f"differs")
                                    torch.save({"weight": w, "ours": mine, "theirs": t},
                                               f"/tmp/ao_random_fail_{scheme}_{failures}.pt")
            print(f"ao {scheme} {mode}: done ({compared} tensors compared so far, "
                  f"{failures} failures)")
    print(f"{drawn} weights, {compared} tensors compared, {failures} differ")
    print(f"beside those, differing only where a NaN reaches the bytes: {nan_tensors} quantized "
          f"tensors (only in scales, and their elements, whose elements hold a NaN), "
          f"{nan_dequantized} dequantized weights (only in NaN bits)")
    print(f"against the pipeline's form (a zero point of 0.0 added): {pipeline_tensors} float8 "
          f"weights differ in {pipeline_bytes} bytes, {pipeline_other} of them other than -0 "
          f"(ours 0x80) against +0 (theirs 0x00) outside scales whose elements hold a NaN")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
