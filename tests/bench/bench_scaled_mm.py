#!/usr/bin/env python3
"""The anchor of `tessera bench gemm --dtype fp8`: PyTorch's torch._scaled_mm (e4m3fn operands,
per-tensor fp32 scales, bf16 output -- the call tessera's scaled GEMM makes of cuBLASLt) beside
bf16 F.linear, on the same Llama-3-8B GEMMs and M, timed as gemm_torch_rotating.py times (events
around back-to-back calls rotating over operand sets whose total exceeds twice the L2 cache, ~60
ms each, median of three means, after a warm-up call).

Values as tessera's: w uniform in +-sqrt(3/k), x in +-1, each quantized per tensor with scale =
amax / 448; and row-wise (a scale per token of x and per output feature of w: scale_a [M, 1],
scale_b [1, N], what `tessera bench gemm --dtype fp8-rowwise` and `quantization: fp8` run).
lm_head writes bf16 in every column. Prints a table (ms, TFLOP/s, bf16 / fp8) and writes JSON
with --json.

usage: bench_scaled_mm.py M_LIST [--json FILE]      (M_LIST like 1,16,64,256)
"""

import json

import torch
import torch.nn.functional as F

from gemm_torch_rotating import SHAPES, bench_args, median_ms, rotated_operands

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448


def quantize(t):
    """Per-tensor: (codes, scale) with t ~= codes * scale."""
    scale = (t.abs().amax().float() / FP8_MAX).clamp(min=torch.finfo(torch.float32).tiny)
    return (t.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def quantize_rows(t):
    """Per row: (codes, scales [rows, 1]) with t ~= codes * scales."""
    scale = (t.abs().amax(dim=1, keepdim=True).float() / FP8_MAX).clamp(
        min=torch.finfo(torch.float32).tiny)
    return (t.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def main():
    m_values, json_path, l2 = bench_args()
    rows = []
    print(f"{'gemm':8s} {'M':>5s} {'copies':>6s} {'bf16 ms':>9s} {'TFLOP/s':>8s} "
          f"{'fp8 ms':>9s} {'TFLOP/s':>8s} {'bf16/fp8':>8s} {'rw ms':>9s} {'bf16/rw':>8s}")
    for name, n, k in SHAPES:
        for m in m_values:
            copies, ws, xs = rotated_operands(m, n, k, l2)
            # The FP8 sets hold half the bytes: twice as many of them exceed twice the L2 too
            # (sized as bf16 sets for 2 x L2, then quantized), as tessera's bench sizes its own.
            fp8_copies, ws8, xs8 = rotated_operands(m, n, k, 2 * l2)
            wq = [quantize(w) for w in ws8]
            xq = [quantize(x) for x in xs8]
            wr = [quantize_rows(w) for w in ws8]
            xr = [quantize_rows(x) for x in xs8]
            del ws8, xs8
            flops = 2.0 * m * n * k

            def linear(i):
                return F.linear(xs[i % copies], ws[i % copies])

            def scaled(i):
                (x, sx), (w, sw) = xq[i % fp8_copies], wq[i % fp8_copies]
                # mat2 column-major (w.t()), as _scaled_mm wants: the TN GEMM of a linear layer.
                return torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)

            def rowwise(i):
                (x, sx), (w, sw) = xr[i % fp8_copies], wr[i % fp8_copies]
                return torch._scaled_mm(x, w.t(), scale_a=sx, scale_b=sw.t(),
                                        out_dtype=torch.bfloat16)

            bf16_ms = median_ms(linear)
            fp8_ms = median_ms(scaled)
            rw_ms = median_ms(rowwise)
            print(f"{name:8s} {m:5d} {copies:6d} {bf16_ms:9.4f} {flops / bf16_ms / 1e9:8.1f} "
                  f"{fp8_ms:9.4f} {flops / fp8_ms / 1e9:8.1f} {bf16_ms / fp8_ms:8.2f} "
                  f"{rw_ms:9.4f} {bf16_ms / rw_ms:8.2f}", flush=True)
            rows.append({"gemm": name, "m": m, "n": n, "k": k, "copies": copies,
                         "fp8_copies": fp8_copies,
                         "bf16_ms": bf16_ms, "bf16_tflops": flops / bf16_ms / 1e9,
                         "fp8_ms": fp8_ms, "fp8_tflops": flops / fp8_ms / 1e9,
                         "rowwise_ms": rw_ms, "rowwise_tflops": flops / rw_ms / 1e9,
                         "fp8_bytes": n * k + m * k + m * n * 2})
            del ws, xs, wq, xq, wr, xr
            torch.cuda.empty_cache()
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "fp8": str(FP8), "gemms": rows}, f, indent=2)


if __name__ == "__main__":
    main()
