"""PyTorch's own cast throughput, for comparison with `dtcast bench` (not needed by the tests).

Measures `dst.copy_(src)` into a preallocated tensor for the hot pairs (`--all`: every ordered
pair of torch's 14 real dtypes below), median of R runs, with torch's default thread count (set
OMP_NUM_THREADS / --threads to pin it). Prints one JSON object per line: {"from", "to",
"elements", "threads", "gelem_per_s"}.

    python scripts/torch_copy_bench.py --elements 67108864 --threads 2 [--all | --pairs a:b,c:d]
"""
import argparse
import json
import time
import warnings

import torch

# complex -> real drops the imaginary part, as dtcast's Torch mode does; torch warns once.
warnings.filterwarnings("ignore", message="Casting complex values to real")

PAIRS = [
    ("float32", "bfloat16"), ("bfloat16", "float32"), ("float32", "float16"), ("float16", "float32"),
    ("float64", "float32"), ("float32", "float64"), ("float64", "bfloat16"), ("float32", "int32"),
    ("int32", "float32"), ("int64", "int32"), ("uint8", "float32"), ("float32", "uint8"),
    ("float32", "float8_e4m3fn"), ("float32", "float8_e5m2"), ("bool", "float32"), ("int32", "int64"),
    ("float16", "bfloat16"), ("bfloat16", "float16"), ("bfloat16", "float8_e4m3fn"),
    ("float16", "float8_e4m3fn"), ("bfloat16", "float8_e5m2"), ("float16", "float8_e5m2"),
    ("float8_e4m3fn", "bfloat16"), ("float8_e4m3fn", "float16"), ("float8_e5m2", "bfloat16"),
    ("float8_e5m2", "float16"),
]

# torch's real dtypes that dtcast casts as torch does (`--all` takes every ordered pair of them).
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, default=1 << 26)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--all", action="store_true", help="every ordered pair of DTYPES")
    p.add_argument("--pairs", help="comma-separated pairs FROM:TO (torch's dtype names)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = args.elements
    base = (torch.rand(n, dtype=torch.float64) * 200 - 100)
    if args.pairs:
        pairs = [tuple(pair.split(":")) for pair in args.pairs.split(",")]
    elif args.all:
        pairs = [(a, b) for a in DTYPES for b in DTYPES if a != b]
    else:
        pairs = PAIRS
    for a, b in pairs:
        src = base.to(getattr(torch, a))
        dst = torch.empty(n, dtype=getattr(torch, b))
        dst.copy_(src)
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t)
        times.sort()
        med = times[len(times) // 2]
        print(json.dumps({"from": a, "to": b, "elements": n, "threads": torch.get_num_threads(),
                          "gelem_per_s": round(n / med / 1e9, 4)}), flush=True)


if __name__ == "__main__":
    main()
