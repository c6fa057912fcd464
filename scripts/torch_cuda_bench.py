"""PyTorch's CUDA cast throughput, for comparison with `dtcast bench --device cuda:0` (not needed by
the tests).

For each hot pair, on the same values as dtcast's bench (uniform in [0.5, 99.5)): `src.to(dtype)`
(allocation from torch's caching allocator included, as a user calls it), `dst.copy_(src)` into a
preallocated tensor (the kernel alone), and a device-to-device copy of as many bytes as the cast
reads + writes. Rounds are interleaved; CUDA events; medians. One JSON object per line with the
keys of dtcast's bench (`cast_gbps` is `copy_`, `to_gbps` is `.to()`, GB/s count bytes read +
written).

    python scripts/torch_cuda_bench.py --elements 268435456
"""
import argparse
import json

import torch

from torch_copy_bench import PAIRS  # the hot pairs, as dtcast bench lists them


def timed(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--elements", type=int, default=1 << 26)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--transfers", action="store_true", help="also host <-> device, 1 GiB, pinned and pageable")
    args = p.parse_args()
    n = args.elements
    dev = torch.device("cuda:0")
    base = torch.rand(n, dtype=torch.float64, device=dev) * 99 + 0.5
    for a, b in PAIRS:
        src = base.to(getattr(torch, a))
        dst = torch.empty(n, dtype=getattr(torch, b), device=dev)
        half = n * (src.element_size() + dst.element_size()) // 2
        ca, cb = torch.ones(half, dtype=torch.uint8, device=dev), torch.empty(half, dtype=torch.uint8, device=dev)
        dst.copy_(src), cb.copy_(ca), src.to(dst.dtype)
        torch.cuda.synchronize()
        k, c, t = [], [], []
        for _ in range(args.repeat):
            k.append(timed(lambda: dst.copy_(src)))
            c.append(timed(lambda: cb.copy_(ca)))
            t.append(timed(lambda: src.to(dst.dtype)))
        med = lambda xs: sorted(xs)[len(xs) // 2]
        byts = n * (src.element_size() + dst.element_size())
        print(json.dumps({"from": a, "to": b, "elements": n, "device": "cuda:0", "library": "torch " + torch.__version__,
                          "gelem_per_s": round(n / med(k) / 1e9, 4), "cast_gbps": round(byts / med(k) / 1e9, 3),
                          "memcpy_gbps": round(byts / med(c) / 1e9, 3), "to_gbps": round(byts / med(t) / 1e9, 3)}),
              flush=True)
        del src, dst, ca, cb
    if args.transfers:
        transfers(args.repeat)


def transfers(repeat):
    """1 GiB host <-> device from pageable and pinned memory, and a float32 CPU tensor to
    (cuda, bfloat16), wall clock after synchronising."""
    import time
    n = 1 << 30
    pageable = torch.ones(n, dtype=torch.uint8)
    pinned = torch.ones(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="cuda:0")
    f32 = torch.rand(n // 4, dtype=torch.float32) * 99 + 0.5

    def wall(fn):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t

    cases = {
        ("h2d", "pageable"): lambda: dev.copy_(pageable),
        ("h2d", "pinned"): lambda: dev.copy_(pinned, non_blocking=True),
        ("d2h", "pageable"): lambda: pageable.copy_(dev),
        ("d2h", "pinned"): lambda: pinned.copy_(dev, non_blocking=True),
        ("to", "float32 cpu -> (cuda, bfloat16)"): lambda: f32.to("cuda:0", torch.bfloat16),
    }
    times = {k: [] for k in cases}
    for r in range(repeat + 1):
        for k, fn in cases.items():
            t = wall(fn)
            if r:
                times[k].append(t)
    for (direction, memory), ts in times.items():
        med = sorted(ts)[len(ts) // 2]
        print(json.dumps({"transfer": direction, "memory": memory, "bytes": n, "seconds": round(med, 6),
                          "gbps": round(n / med / 1e9, 3), "library": "torch " + torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
