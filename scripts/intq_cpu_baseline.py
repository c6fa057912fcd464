#!/usr/bin/env python3
"""The integer formats' own CPU dequantization beside dtcast's, on the same 4096 x 4096 weight
and the same two threads, rounds interleaved (not a test: it needs torch).

Each reference is its format's own code: GPTQ's torch dequantization as AutoGPTQ's
`qlinear_torch` and GPTQModel's torch kernel run it (`scales[g_idx] * (q - zeros[g_idx])`, zeros
stored minus one), AutoAWQ 0.2.9's `awq.utils.packing_utils.dequantize_gemm`, compressed-tensors
0.20's `unpack_from_int32` + `dequantize`, bitsandbytes 0.50's `dequantize_4bit`. Outputs are
checked equal to dtcast's (`dtcast convert` of the same tensors) before timing. Versions as
installed (the lines printed name them); `DTCAST` is the binary (target/release/dtcast).

    python3 scripts/intq_cpu_baseline.py [ROUNDS]
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
DTCAST = os.environ.get("DTCAST", "target/release/dtcast")
torch.set_num_threads(2)
ROWS, COLS, GROUP = 4096, 4096, 128


def save(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        a = t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        dtype = {torch.int32: "I32", torch.float16: "F16", torch.bfloat16: "BF16", torch.uint8: "U8",
                 torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(a)]}
        offset += len(a)
        blobs.append(a)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def load_one(path, name):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])[name]
    s, e = h["data_offsets"]
    raw = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.uint16)
    return torch.from_numpy(raw.copy()).view(torch.bfloat16 if h["dtype"] == "BF16" else torch.float16).reshape(h["shape"])


def dtcast_result(tensors, config, dtype):
    with tempfile.TemporaryDirectory() as d:
        save(os.path.join(d, "model.safetensors"), tensors)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"quantization_config": config}, f)
        out = os.path.join(d, "out.safetensors")
        subprocess.run([DTCAST, "convert", os.path.join(d, "model.safetensors"), "-o", out, "--dtype", dtype],
                       check=True, capture_output=True)
        return load_one(out, "m.weight")


def gptq_case(g = torch.Generator().manual_seed(1)):
    qweight = torch.randint(-2**31, 2**31 - 1, (COLS // 8, ROWS), dtype=torch.int32, generator=g)
    qzeros = torch.randint(-2**31, 2**31 - 1, (COLS // GROUP, ROWS // 8), dtype=torch.int32, generator=g)
    scales = (torch.rand(COLS // GROUP, ROWS, generator=g) * 0.02).to(torch.float16)
    g_idx = torch.arange(COLS, dtype=torch.int32) // GROUP
    wf = torch.arange(0, 32, 4, dtype=torch.int32)

    def reference():
        zeros = torch.bitwise_right_shift(qzeros.unsqueeze(2).expand(-1, -1, 8), wf.unsqueeze(0)).to(torch.int8)
        zeros = torch.bitwise_and(zeros + 1, 15).reshape(scales.shape)
        weight = torch.bitwise_and(torch.bitwise_right_shift(qweight.unsqueeze(1).expand(-1, 8, -1), wf.unsqueeze(-1)).to(torch.int8), 15)
        weight = weight.reshape(-1, weight.shape[2])
        return (scales[g_idx.long()] * (weight - zeros[g_idx.long()])).t().contiguous()

    tensors = {"m.qweight": qweight, "m.qzeros": qzeros, "m.scales": scales, "m.g_idx": g_idx}
    config = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "checkpoint_format": "gptq"}
    return "gptq4", reference, tensors, config, "float16"


def awq_case(g = torch.Generator().manual_seed(2)):
    path = importlib.util.find_spec("awq").submodule_search_locations[0] + "/utils/packing_utils.py"
    spec = importlib.util.spec_from_file_location("packing_utils", path)
    packing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(packing)
    qweight = torch.randint(-2**31, 2**31 - 1, (COLS, ROWS // 8), dtype=torch.int32, generator=g)
    qzeros = torch.randint(-2**31, 2**31 - 1, (COLS // GROUP, ROWS // 8), dtype=torch.int32, generator=g)
    scales = (torch.rand(COLS // GROUP, ROWS, generator=g) * 0.02).to(torch.float16)

    def reference():
        return packing.dequantize_gemm(qweight, qzeros, scales, 4, GROUP).t().contiguous()

    tensors = {"m.qweight": qweight, "m.qzeros": qzeros, "m.scales": scales}
    config = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm", "zero_point": True}
    return "awq4", reference, tensors, config, "float16"


def ct_case(g = torch.Generator().manual_seed(3)):
    from compressed_tensors.compressors.pack_quantized.helpers import unpack_from_int32
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    from compressed_tensors.quantization import QuantizationArgs
    packed = torch.randint(-2**31, 2**31 - 1, (ROWS, COLS // 8), dtype=torch.int32, generator=g)
    scale = (torch.rand(ROWS, COLS // GROUP, generator=g) * 0.02).to(torch.bfloat16)
    args = QuantizationArgs(num_bits=4, type="int", strategy="group", group_size=GROUP, symmetric=True)

    def reference():
        q = unpack_from_int32(packed, 4, torch.Size([ROWS, COLS]))
        return dequantize(q, scale, None, args=args, dtype=torch.bfloat16)

    tensors = {"m.weight_packed": packed, "m.weight_scale": scale, "m.weight_shape": torch.tensor([ROWS, COLS])}
    config = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
              "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": GROUP, "symmetric": True}}},
              "format": "pack-quantized"}
    return "w4a16", reference, tensors, config, "bfloat16"


def nf4_case():
    import bitsandbytes.functional as F
    w = torch.randn(ROWS, COLS, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(4)) * 0.02
    q, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)

    def reference():
        return F.dequantize_4bit(q, state)

    packed = state.as_dict(packed=True)
    tensors = {"m.weight": q}
    for k, v in packed.items():
        tensors["m.weight." + k] = v
    config = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    return "nf4", reference, tensors, config, "bfloat16"


def dtcast_time(scheme):
    out = subprocess.run([DTCAST, "bench", "--scheme", scheme, "--elements", str(ROWS * COLS), "--threads", "2",
                          "--repeat", "3", "--json"], check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    return ROWS * COLS / (row["gelem_per_s"] * 1e9)


def main():
    import bitsandbytes, compressed_tensors
    print(f"torch {torch.__version__} (2 threads), compressed-tensors {compressed_tensors.__version__}, "
          f"bitsandbytes {bitsandbytes.__version__}, autoawq 0.2.9 packing_utils; {ROWS}x{COLS}, {ROUNDS} rounds")
    for name, reference, tensors, config, dtype in [gptq_case(), awq_case(), ct_case(), nf4_case()]:
        want = reference()
        got = dtcast_result(tensors, config, dtype)
        same = torch.equal(want.view(torch.int16), got.view(torch.int16))
        ref_times, ours = [], []
        for _ in range(ROUNDS):
            t = time.perf_counter()
            reference()
            ref_times.append(time.perf_counter() - t)
            ours.append(dtcast_time(name))
        r, d = sorted(ref_times)[ROUNDS // 2], sorted(ours)[ROUNDS // 2]
        print(f"{name:8} outputs equal: {same}; reference {r * 1e3:8.1f} ms, dtcast {d * 1e3:6.1f} ms ({r / d:5.1f}x)")


if __name__ == "__main__":
    main()
