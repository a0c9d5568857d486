#!/usr/bin/env python3
"""tessera vs Hugging Face transformers on the same (dequantized GGUF) weights.

For each prompt: tessera's token ids against the HF tokenizer's, tessera's next-token logits
against LlamaForCausalLM's (relative L2 error, fp32 on both sides), and 64 greedy tokens
(a plain argmax loop on the HF side, eos ignored as tessera is told to).

usage: compare_transformers.py MODEL.gguf DUMP_LOGITS_BINARY [--out docs/reference.md]
needs: torch, transformers, gguf (pip)
"""
import argparse, datetime, json, os, platform, subprocess, sys, tempfile

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is 12 * 7? Answer briefly.<|im_end|>\n<|im_start|>assistant\n",
]
TOLERANCE = 1e-3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("dump_logits")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "tessera.json")
        subprocess.run([args.dump_logits, args.model, dump, *PROMPTS], check=True)
        ours = json.load(open(dump))

    d, f = os.path.split(os.path.abspath(args.model))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model.eval()

    rows, ok = [], True
    with torch.no_grad():
        for item in ours:
            hf_ids = tok(item["prompt"], add_special_tokens=True)["input_ids"]
            ids = torch.tensor([item["ids"]])
            ref = model(ids).logits[0, -1].double()
            mine = torch.tensor(item["logits"], dtype=torch.float64)
            rel = ((mine - ref).norm() / ref.norm()).item()
            # Greedy, eos ignored: argmax loop with the KV cache.
            out = model(ids, use_cache=True)
            past, greedy = out.past_key_values, []
            nxt = out.logits[0, -1].argmax().item()
            for _ in range(len(item["greedy"])):
                greedy.append(nxt)
                out = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[0, -1].argmax().item()
            same_prefix = next((i for i, (a, b) in enumerate(zip(greedy, item["greedy"])) if a != b), len(greedy))
            row = dict(prompt=item["prompt"], tokens_match=hf_ids == item["ids"], n_ids=len(item["ids"]),
                       rel_err=rel, argmax_match=int(mine.argmax()) == int(ref.argmax()),
                       greedy_identical=greedy == item["greedy"], greedy_common_prefix=same_prefix,
                       text=tok.decode(item["greedy"]))
            ok &= row["tokens_match"] and rel < TOLERANCE and row["greedy_identical"]
            rows.append(row)

    lines = [
        "# tessera vs transformers: logits and greedy tokens",
        "",
        f"Date: {datetime.date.today()}; machine: {platform.node()} ({os.cpu_count()} CPUs, no GPU); "
        f"torch {torch.__version__}, transformers {transformers.__version__}.",
        f"Model: `{os.path.basename(args.model)}` (GGUF, dequantized to fp32 by both sides).",
        f"Command: `python3 tests/reference/compare_transformers.py {args.model} build/tests/dump_logits`",
        "",
        "| prompt | ids match HF tokenizer | prompt tokens | next-token logits rel. L2 error | argmax equal | 64 greedy tokens identical |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        p = r["prompt"].replace("\n", "\\n").replace("|", "\\|")
        lines.append(f"| `{p}` | {r['tokens_match']} | {r['n_ids']} | {r['rel_err']:.2e} | {r['argmax_match']} | "
                     f"{r['greedy_identical']} ({r['greedy_common_prefix']}/64 common prefix) |")
    lines += ["", f"Tolerance: relative error < {TOLERANCE}. Result: {'PASS' if ok else 'FAIL'}.", ""]
    for r in rows:
        lines.append(f"- `{r['prompt'][:40]!r}` → {r['text']!r}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        open(args.out, "w").write(report)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
