#!/usr/bin/env python3
"""Where a step's device time goes: reads the CSV that Nsight Compute writes for a window of
kernels (`ncu --csv --metrics gpu__time_duration.sum ...`, as `scripts/gpu-check.sh profile`
runs it) and prints each kind of kernel's time per engine step -- GEMMs, attention, norms, rope and
the KV-cache write, activations, sampling, collectives, the rest -- and the kernels that took the
most, with a JSON copy. Steps are counted by the embedding kernel (one per step). ncu runs each
kernel alone, so overlap between neighbours (programmatic dependent launch) is not in these
figures: they are each kernel's own time.

usage: kernel_profile.py NCU_CSV [JSON_OUT]
"""
import csv, collections, json, re, sys

KINDS = [  # first match wins
    ("embedding", r"embedding"),
    ("sampling", r"sampl|argmax|top_?k|top_?p|softmax|logit|gather_rows|penalt"),
    ("attention", r"attention|prefill|decode_|flash|paged"),
    ("rope + kv write", r"rope|cache"),
    ("norm", r"rms_norm|norm"),
    ("activation", r"gated|silu|gelu|activation"),
    ("collective", r"nccl|one_shot|all_reduce"),
    ("gemm", r"gemm|nvjet|xmma|cutlass|sm90_|sm80_|smallm|cublas|Kernel2|splitk|ampere"),
]


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def main():
    rows = []
    with open(sys.argv[1], newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's log lines before the CSV are not quoted
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0,
                 "ms": 1.0, "second": 1e3, "s": 1e3}.get(unit)
        if scale is None:
            sys.exit(f"kernel_profile: unknown time unit {unit!r}")
        rows.append((r["Kernel Name"], value * scale))
    if not rows:
        sys.exit("kernel_profile: no gpu__time_duration.sum rows in " + sys.argv[1])
    steps = max(1, sum(1 for name, _ in rows if "embedding" in name))
    by_kind, by_name, counts = collections.Counter(), collections.Counter(), collections.Counter()
    for name, ms in rows:
        by_kind[kind_of(name)] += ms
        short = re.sub(r"\(.*", "", name)[:90]
        by_name[short] += ms
        counts[short] += 1
    total = sum(by_kind.values())
    print(f"{len(rows)} kernels, {steps} steps (embedding kernels), {total / steps:.2f} ms of kernel time a step")
    print(f"{'kind':18s} {'ms/step':>9s} {'share':>7s}")
    for kind, ms in by_kind.most_common():
        print(f"{kind:18s} {ms / steps:9.3f} {100 * ms / total:6.1f}%")
    print(f"\n{'kernel':90s} {'ms/step':>9s} {'calls/step':>10s}")
    for name, ms in by_name.most_common(15):
        print(f"{name:90s} {ms / steps:9.3f} {counts[name] / steps:10.1f}")
    if len(sys.argv) > 2:
        json.dump({"kernels": len(rows), "steps": steps, "ms_per_step": total / steps,
                   "by_kind_ms_per_step": {k: v / steps for k, v in by_kind.items()},
                   "top_kernels_ms_per_step": {k: v / steps for k, v in by_name.most_common(30)}},
                  open(sys.argv[2], "w"), indent=2)


if __name__ == "__main__":
    main()
