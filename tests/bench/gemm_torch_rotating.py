#!/usr/bin/env python3
"""torch F.linear on the GEMMs of `tessera bench gemm`, timed the way that benchmark times
(the anchor bench_gemm.py times each call alone with triton's do_bench, launch latency and an
L2 flush included, which at decode sizes is a different measurement):

  events around ITERS back-to-back calls rotating over operand sets whose total exceeds twice the
  L2 cache, ITERS sized to ~60 ms, median of three means, after a warm-up call.

Same shapes, same value ranges (w uniform in +-sqrt(3/k), x in +-1). lm_head writes bf16 here
(F.linear's output type); tessera's lm_head writes fp32 logits.

usage: gemm_torch_rotating.py M_LIST [--json FILE]      (M_LIST like 1,8,32)
"""
import argparse, json

import torch
import torch.nn.functional as F

SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096),
          ("down", 4096, 14336), ("lm_head", 128256, 4096)]


def mean_ms(fn, iters):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(iters):
        fn(i)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / iters


def median_ms(fn):
    """fn(i) timed after a warm-up call: ITERS sized to ~60 ms, the median of three means."""
    fn(0)
    estimate = mean_ms(fn, 1)
    iters = max(1, min(1000, int(60.0 / max(estimate, 1e-3))))
    return sorted(mean_ms(fn, iters) for _ in range(3))[1]


def rotated_operands(m, n, k, l2):
    """(copies, ws, xs): bf16 operand sets of one GEMM, w in +-sqrt(3/k) and x in +-1, enough
    sets (at most 16) that they exceed twice the L2 cache."""
    operand = n * k * 2 + m * k * 2 + m * n * 2
    copies = max(1, min(16, 2 * l2 // operand + 1))
    bound = (3.0 / k) ** 0.5
    ws = [torch.empty(n, k, device="cuda", dtype=torch.bfloat16).uniform_(-bound, bound)
          for _ in range(copies)]
    xs = [torch.empty(m, k, device="cuda", dtype=torch.bfloat16).uniform_(-1, 1)
          for _ in range(copies)]
    return copies, ws, xs


def bench_args():
    """The command line both GEMM anchors take (M_LIST [--json FILE]): the M values, the JSON
    path (or None) and the device's L2 size, which the operand rotation outgrows."""
    ap = argparse.ArgumentParser()
    ap.add_argument("ms")
    ap.add_argument("--json")
    args = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return [int(v) for v in args.ms.split(",")], args.json, l2


def main():
    m_values, json_path, l2 = bench_args()
    rows = []
    print(f"{'gemm':8s} {'M':>5s} {'copies':>6s} {'ms':>9s} {'GB/s':>6s} {'TFLOP/s':>8s}")
    for name, n, k in SHAPES:
        for m in m_values:
            operand = n * k * 2 + m * k * 2 + m * n * 2
            copies, ws, xs = rotated_operands(m, n, k, l2)
            ms = median_ms(lambda i: F.linear(xs[i % copies], ws[i % copies]))
            gbs = operand / (ms * 1e-3) / 1e9
            tflops = 2.0 * m * n * k / (ms * 1e-3) / 1e12
            print(f"{name:8s} {m:5d} {copies:6d} {ms:9.4f} {gbs:6.0f} {tflops:8.1f}", flush=True)
            rows.append({"gemm": name, "m": m, "n": n, "k": k, "ms": ms, "gb_s": gbs,
                         "tflops": tflops})
            del ws, xs
            torch.cuda.empty_cache()
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "gemms": rows}, f, indent=2)


if __name__ == "__main__":
    main()
