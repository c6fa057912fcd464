#!/usr/bin/env python3
"""AutoRound's own checkpoint format (`quant_method: auto-round`), packed by AutoRound 0.16.1's
QuantLinear classes as its exporter picks them by `packing_format`:

- `auto_round` (asymmetric): `auto_round_extension.torch.qlinear_torch.QuantLinear`, GPTQ's
  layout with the zero points stored as they are;
- `auto_round:auto_gptq` (what it writes for symmetric weights): `qlinear_torch_zp.QuantLinear`,
  GPTQ's layout with the zero points stored minus one (AutoGPTQ's v1);
- `auto_round:gptqmodel`: `qlinear_torch.QuantLinear` with a `g_idx`;
- `auto_round:auto_awq`: its copy of AutoAWQ's `WQLinear_GEMM` (`export/export_to_awq/utils.py`).

Each case is a directory of `model.safetensors` (one module: `qweight`, `qzeros`, `scales`,
`g_idx` where the class has one), `config.json` (the keys AutoRound's exporter writes:
`quant_method`, `packing_format`, `bits`, `group_size`, `sym`, `data_type`) and
`reference.safetensors`: the module's own dequantization, transposed to `[out, in]` — for
the GPTQ layouts read out of its `forward` on the identity matrix (float16; one product per
output, so the matmul adds only zeros), for AWQ its `dequantize_gemm`. The weights are random codes, zero points and scales made dense as
`float16(s × (q − z))`, so that the packers recover the codes.

    PYTHONPATH=<auto-round 0.16.1 and its dependencies> python3 scripts/autoround_fixtures.py DIR

Made with torch 2.15.0 and auto-round 0.16.1 (`pip download auto-round --no-deps`, unpacked;
it imports with datasets and transformers 5 beside it), seed 1.
"""
import json
import os
import sys

import auto_round
import torch
from auto_round_extension.torch.qlinear_torch import QuantLinear
from auto_round_extension.torch.qlinear_torch_zp import QuantLinear as QuantLinearZp
from auto_round.export.export_to_awq.utils import WQLinear_GEMM, dequantize_gemm
from safetensors.torch import save_file

CASES = [
    # name, packing_format, bits, group size, symmetric, [in, out]
    ("autoround_b4_g128", "auto_round", 4, 128, False, (256, 96)),
    ("autoround_b3_g64", "auto_round", 3, 64, False, (256, 64)),
    ("autoround_gptq_b4_g32", "auto_round:auto_gptq", 4, 32, True, (128, 64)),
    ("autoround_gptqmodel_b2_g128", "auto_round:gptqmodel", 2, 128, False, (384, 64)),
    ("autoround_awq_b4_g64", "auto_round:auto_awq", 4, 64, False, (256, 64)),
]

PREFIX = "model.layers.0.self_attn.o_proj"


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, auto-round {auto_round.__version__}")
    for name, packing, bits, group, sym, (n_in, n_out) in CASES:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        groups = n_in // group
        maxq = (1 << bits) - 1
        q = torch.randint(0, maxq + 1, (n_out, n_in), dtype=torch.int32)
        if sym:
            z = torch.full((n_out, groups), 1 << (bits - 1), dtype=torch.int32)
        else:
            z = torch.randint(0, maxq + 1, (n_out, groups), dtype=torch.int32)
        s = (torch.rand(n_out, groups) * 0.01 + 0.001).to(torch.float16)
        each = lambda t: t.repeat_interleave(group, dim=1)
        product = (each(s).float() * (q - each(z)).float()).half()
        linear = torch.nn.Linear(n_in, n_out, bias=False, dtype=torch.float16)
        with torch.no_grad():
            linear.weight.copy_(product)
        if packing == "auto_round:auto_awq":
            # (As its AWQ exporter calls it: scales and zeros transposed, zeros in float32.)
            m = WQLinear_GEMM.from_linear(linear, bits, group, scales=s.t().contiguous(),
                                          zeros=z.t().contiguous().float(), device="cpu")
            dense = dequantize_gemm(m.qweight, m.qzeros, m.scales, bits, group).t().contiguous()
        else:
            if packing == "auto_round:auto_gptq":
                m = QuantLinearZp(bits, group, n_in, n_out, False)
            else:
                m = QuantLinear(bits, group, n_in, n_out, False,
                                g_idx=packing.endswith("gptqmodel"))
            m.device = "cpu"  # (as AutoRound's exporter sets it before packing)
            m.pack(linear, s, z, None, device="cpu")
            m.post_init()
            with torch.no_grad():
                dense = m(torch.eye(n_in, dtype=torch.float16)).t().contiguous()
        assert torch.equal(dense.view(torch.int16), product.view(torch.int16)), name
        names = ["qweight", "qzeros", "scales"] + (["g_idx"] if hasattr(m, "g_idx") else [])
        tensors = {f"{PREFIX}.{k}": getattr(m, k).contiguous() for k in names}
        save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        save_file({f"{PREFIX}.weight": dense}, os.path.join(d, "reference.safetensors"),
                  metadata={"format": "pt"})
        qc = {"bits": bits, "group_size": group, "sym": sym, "data_type": "int",
              "quant_method": "auto-round", "packing_format": packing}
        config = {"model_type": "llama", "torch_dtype": "float16", "quantization_config": qc}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        print(name, {k: tuple(v.shape) for k, v in tensors.items()})


if __name__ == "__main__":
    main()
