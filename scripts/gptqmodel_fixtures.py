#!/usr/bin/env python3
"""GPTQ cases the shared references lack, packed by GPTQModel itself: 3-bit codes (ten and a
bit per word, crossing word boundaries, in `qweight` and `qzeros`), act-order at 3 bits, and the
`gptq_v2` checkpoint format (zeros stored as they are, not minus one) at 4 and 3 bits.

Each case is a directory of `model.safetensors` (one quantized module, `qweight`, `qzeros`,
`scales`, `g_idx`), `config.json` (its `quantization_config` GPTQModel's `QuantizeConfig.to_dict`)
and `reference.safetensors`. A dense float16 weight, random
scales, zero points and (act-order) group index go through `TorchLinear.pack_block`, GPTQModel's
packer; a `gptq` (v1) case is then exported by `convert_gptq_v2_to_v1_format_module`, as
GPTQModel saves it. The reference is `TorchLinear.dequantize_weight()` — GPTQModel's torch
kernel, `scales[g_idx] * (q - zeros[g_idx])` in float16 — on the packed module (v2 zeros, the
form GPTQModel computes with), transposed to `[out, in]`. The script also checks that
GPTQModel's own checkpoint dequantizer (`utils/model_dequant.convert_gptq_file`, float32
arithmetic) gives the same float16 bytes from the saved file.

    python3 scripts/gptqmodel_fixtures.py tests/fixtures/intq_added

Made with torch 2.15.0 and GPTQModel 7.7.0 (its source on the path: `pip download gptqmodel
--no-deps --no-binary :all:`, unpacked; it imports with transformers 5 and its small
dependencies), seed 1.
"""
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from safetensors.torch import save_file

import gptqmodel
from gptqmodel.nn_modules.qlinear.torch import TorchLinear
from gptqmodel.quantization.config import QuantizeConfig
from gptqmodel.utils.model import convert_gptq_v2_to_v1_format_module
from gptqmodel.utils.model_dequant import convert_gptq_file

CASES = [
    # name, bits, group size, act-order, checkpoint format, [in, out]
    ("gptq_b3_g128", 3, 128, False, "gptq", (384, 160)),
    ("gptq_b3_g32_act", 3, 32, True, "gptq", (256, 96)),
    ("gptq_v2_b4_g128", 4, 128, False, "gptq_v2", (256, 128)),
    ("gptq_v2_b3_g64_act", 3, 64, True, "gptq_v2", (192, 64)),
]

PREFIX = "model.layers.0.mlp.down_proj"


def main():
    out = sys.argv[1]
    torch.manual_seed(1)
    print(f"torch {torch.__version__}, gptqmodel {gptqmodel.__version__}")
    for name, bits, group, act, fmt, (n_in, n_out) in CASES:
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        groups = n_in // group
        maxq = (1 << bits) - 1
        linear = torch.nn.Linear(n_in, n_out, bias=False, dtype=torch.float16)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(n_out, n_in) * 0.02)
        scales = (torch.rand(n_out, groups) * 0.01 + 0.001).to(torch.float16)
        zeros = torch.randint(0, maxq + 1, (n_out, groups), dtype=torch.int32)
        if act:
            g_idx = torch.randint(0, groups, (n_in,), dtype=torch.int32)
        else:
            g_idx = torch.arange(n_in, dtype=torch.int32) // group
        m = TorchLinear(bits=bits, group_size=group, sym=False, desc_act=act,
                        in_features=n_in, out_features=n_out, bias=False)
        m.pack_block(linear, scales, zeros, g_idx)
        m.post_init()
        dense = m.dequantize_weight().T.contiguous()
        assert dense.dtype == torch.float16
        if fmt == "gptq":
            # (Its config argument is read only for what the module does not say.)
            config = SimpleNamespace(bits=bits, pack_dtype=torch.int32)
            convert_gptq_v2_to_v1_format_module(m, config)
        tensors = {f"{PREFIX}.{k}": getattr(m, k).contiguous()
                   for k in ("qweight", "qzeros", "scales", "g_idx")}
        model = os.path.join(d, "model.safetensors")
        save_file(tensors, model, metadata={"format": "pt"})
        save_file({f"{PREFIX}.weight": dense}, os.path.join(d, "reference.safetensors"),
                  metadata={"format": "pt"})
        # The quantization_config GPTQModel writes (`method`/`quant_method`, `format`/
        # `checkpoint_format`), less its `meta` (run options, a temporary path among them).
        qc = json.loads(json.dumps(QuantizeConfig(bits=bits, group_size=group, desc_act=act,
                                                  sym=False, format=fmt).to_dict(), default=str))
        qc.pop("meta")
        config = {"model_type": "llama", "torch_dtype": "float16", "quantization_config": qc}
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        again = convert_gptq_file(Path(model), torch.float16, qc, "cpu")[f"{PREFIX}.weight"]
        assert torch.equal(again.view(torch.int16), dense.view(torch.int16)), name
        print(name, tuple(m.qweight.shape), tuple(m.qzeros.shape), fmt)


if __name__ == "__main__":
    main()
