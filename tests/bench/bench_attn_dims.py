#!/usr/bin/env python3
"""The anchor ../shared/anchors/bench_attn.py (torch SDPA forward, bf16, d=128: flash =
FlashAttention-2, cuDNN, memory-efficient backends) at other head dims, on the same (B, HQ, HK,
NQ, NK) rows, the same FLOP count (4 B HQ NQ NK d, halved when causal) and the same timer
(triton.testing.do_bench, 25 ms warm-up, 100 ms timed, median), so that `tessera bench kernels
--head-dim D` can be read beside it as the d=128 table is read beside the anchor.

usage: bench_attn_dims.py [--head-dim 64,256] [--json FILE]
"""
import argparse, json

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

ROWS = [(16, 16, 16, 1024, 1024), (8, 16, 16, 2048, 2048), (4, 16, 16, 4096, 4096),
        (2, 16, 16, 8192, 8192), (1, 16, 16, 16384, 16384), (2, 48, 48, 1024, 1024),
        (2, 48, 48, 2048, 1024), (2, 48, 48, 4096, 8192), (2, 48, 48, 8192, 4096),
        (2, 48, 48, 16384, 8192), (8, 32, 8, 2048, 2048), (1, 32, 8, 8192, 8192)]
BACKENDS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", default="64,256")
    ap.add_argument("--json")
    args = ap.parse_args()
    results = []
    for d in (int(x) for x in args.head_dim.split(",")):
        print(f"d={d}: B HQ HK NQ NK causal | flash cudnn efficient (TFLOPS)", flush=True)
        for causal in (False, True):
            for (b, hq, hk, nq, nk) in ROWS:
                if causal and nq != nk:
                    continue
                q = torch.randn(b, hq, nq, d, device="cuda", dtype=torch.bfloat16)
                k = torch.randn(b, hk, nk, d, device="cuda", dtype=torch.bfloat16)
                v = torch.randn(b, hk, nk, d, device="cuda", dtype=torch.bfloat16)
                flop = 4 * b * hq * nq * nk * d * (0.5 if causal else 1.0)
                row = dict(head_dim=d, b=b, hq=hq, hk=hk, nq=nq, nk=nk, causal=causal)
                cells = []
                for name, backend in BACKENDS:
                    try:
                        with sdpa_kernel([backend]):
                            f = lambda: F.scaled_dot_product_attention(
                                q, k, v, is_causal=causal, enable_gqa=(hq != hk))
                            f()
                            ms = triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median")
                        row[name] = flop / ms / 1e9
                        cells.append(f"{row[name]:7.1f}")
                    except Exception:  # a backend that does not take the shape (or head dim)
                        row[name] = None
                        cells.append("   n/a ")
                results.append(row)
                print(b, hq, hk, nq, nk, int(causal), "|", " ".join(cells), flush=True)
                del q, k, v
        torch.cuda.empty_cache()
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
