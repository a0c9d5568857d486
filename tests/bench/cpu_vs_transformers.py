#!/usr/bin/env python3
"""Prefill and decode speed of the default model on this CPU: tessera beside transformers
(fp32, same dequantized GGUF weights, same thread count), in one run, reported as ratios.

usage: cpu_vs_transformers.py MODEL.gguf TESSERA_BINARY [--threads N] [--json FILE]

tessera side: `tessera run` (greedy, eos ignored is not needed: the prompt and lengths are
fixed and the summary line gives prefill and decode tok/s). transformers side: one forward over
the prompt (prefill) and a KV-cached greedy loop (decode), timed with time.perf_counter.
Each side runs REPS times; the median is reported.
"""
import argparse, json, os, re, statistics, subprocess, sys, time

PROMPT_WORDS = 120   # ~128 prompt tokens
NEW_TOKENS = 64
REPS = 3


def tessera_run(binary, model, prompt, threads):
    out = subprocess.run([binary, "run", "--model", model, "--threads", str(threads), "--temperature", "0",
                          "--max-tokens", str(NEW_TOKENS), prompt], capture_output=True, text=True, check=True)
    m = re.search(r"prompt (\d+) tokens, generated (\d+) tokens .*prefill ([\d.]+) tok/s, decode ([\d.]+) tok/s",
                  out.stderr)
    if not m:
        sys.exit("could not read tessera's summary line:\n" + out.stderr)
    return dict(prompt_tokens=int(m[1]), generated=int(m[2]), prefill_tps=float(m[3]), decode_tps=float(m[4]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tessera")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.set_num_threads(args.threads)
    prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * (PROMPT_WORDS // 9))

    ours = [tessera_run(args.tessera, args.model, prompt, args.threads) for _ in range(REPS)]

    d, f = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    ids = tok(prompt, return_tensors="pt")["input_ids"]
    theirs = []
    with torch.no_grad():
        model(ids[:, :8])  # warm-up
        for _ in range(REPS):
            t0 = time.perf_counter()
            out = model(ids, use_cache=True)
            t1 = time.perf_counter()
            past, nxt = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
            for _ in range(NEW_TOKENS - 1):
                out = model(nxt, past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[0, -1].argmax().view(1, 1)
            t2 = time.perf_counter()
            theirs.append(dict(prompt_tokens=ids.shape[1], prefill_tps=ids.shape[1] / (t1 - t0),
                               decode_tps=(NEW_TOKENS - 1) / (t2 - t1)))

    med = lambda rows, k: statistics.median(r[k] for r in rows)
    result = dict(threads=args.threads, prompt_tokens=ours[0]["prompt_tokens"], new_tokens=NEW_TOKENS,
                  tessera=dict(prefill_tps=med(ours, "prefill_tps"), decode_tps=med(ours, "decode_tps")),
                  transformers=dict(prefill_tps=med(theirs, "prefill_tps"), decode_tps=med(theirs, "decode_tps")),
                  torch=torch.__version__)
    print(f"threads={args.threads} prompt={result['prompt_tokens']} tokens, {NEW_TOKENS} new tokens, median of {REPS}")
    print(f"{'':14}{'prefill tok/s':>15}{'decode tok/s':>15}")
    for name in ("tessera", "transformers"):
        print(f"{name:14}{result[name]['prefill_tps']:15.1f}{result[name]['decode_tps']:15.1f}")
    print(f"{'ratio':14}{result['tessera']['prefill_tps'] / result['transformers']['prefill_tps']:15.2f}"
          f"{result['tessera']['decode_tps'] / result['transformers']['decode_tps']:15.2f}")
    if args.json:
        json.dump(result, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
