#!/usr/bin/env python3
"""Where a load's engine steps spent their time, from two scrapes of tesserad's /metrics (before
and after the load): steps, sequences and tokens per step, and the mean milliseconds per step of
each phase of tessera_step_phase_seconds_total (schedule, launch, device_wait, update), plus
preemptions and prefix-cache hits over the load. Prints a table; --json writes the figures.

usage: step_profile.py BEFORE.prom AFTER.prom [--label NAME] [--json PATH]
"""
import argparse
import json
import re
import sys

PHASES = ("schedule", "launch", "device_wait", "update")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)')


def read_samples(path):
    samples = {}
    with open(path) as f:
        for line in f:
            m = SAMPLE.match(line)
            if m and not line.startswith("#"):
                samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return samples


def delta(before, after, name):
    return after.get(name, 0.0) - before.get(name, 0.0)


def profile(before, after):
    steps = delta(before, after, "tessera_step_duration_seconds_count")
    out = {"steps": int(steps)}
    if steps <= 0:
        return out
    out["seqs_per_step"] = delta(before, after, "tessera_step_num_seqs_sum") / steps
    out["tokens_per_step"] = delta(before, after, "tessera_step_num_tokens_sum") / steps
    out["step_ms"] = 1e3 * delta(before, after, "tessera_step_duration_seconds_sum") / steps
    for p in PHASES:
        out[p + "_ms"] = 1e3 * delta(before, after, f'tessera_step_phase_seconds_total{{phase="{p}"}}') / steps
    out["preemptions"] = int(delta(before, after, "tessera_num_preemptions_total"))
    queries = delta(before, after, "tessera_prefix_cache_queries_total")
    hits = delta(before, after, "tessera_prefix_cache_hits_total")
    out["prefix_cache_hit_rate"] = hits / queries if queries > 0 else 0.0
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--label", default="load")
    ap.add_argument("--json")
    args = ap.parse_args()
    p = profile(read_samples(args.before), read_samples(args.after))
    if p["steps"] <= 0:
        print(f"{args.label}: no engine steps between the two scrapes", file=sys.stderr)
        return 1
    cols = ["steps", "seqs_per_step", "tokens_per_step", "step_ms"] + [x + "_ms" for x in PHASES] + \
           ["preemptions", "prefix_cache_hit_rate"]
    print("| load | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    cells = [f"{p[c]:.3f}" if isinstance(p[c], float) else str(p[c]) for c in cols]
    print(f"| {args.label} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"label": args.label, **p}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
