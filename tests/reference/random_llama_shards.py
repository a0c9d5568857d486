#!/usr/bin/env python3
"""A Llama-shaped model with random bf16 weights written straight to sharded safetensors, for
models too large for transformers to initialize on one GPU (Llama-3-70B's shape: ~141 GB). Each
tensor is drawn on the GPU (normal, std 0.02, as transformers initializes Llama; norms 1), so
the host only copies and writes. config.json as transformers writes it for LlamaForCausalLM, the
tiny test tokenizer (prompts are given as token ids). Nothing is done when MODEL_DIR already holds
one.

usage: random_llama_shards.py MODEL_DIR [70b|8b]
"""
import json, os, shutil, sys, time

import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = {
    "70b": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                num_attention_heads=64, num_key_value_heads=8),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8),
}
VOCAB = 128256
LAYERS_PER_SHARD = 4


def layer_tensors(i, s, gen):
    h, inter = s["hidden_size"], s["intermediate_size"]
    d = h // s["num_attention_heads"]
    kv = s["num_key_value_heads"] * d
    p = f"model.layers.{i}."
    shapes = {"self_attn.q_proj.weight": (h, h), "self_attn.k_proj.weight": (kv, h),
              "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, h),
              "mlp.gate_proj.weight": (inter, h), "mlp.up_proj.weight": (inter, h),
              "mlp.down_proj.weight": (h, inter)}
    out = {p + n: torch.empty(shape, dtype=torch.bfloat16, device="cuda").normal_(0, 0.02, generator=gen)
           for n, shape in shapes.items()}
    for n in ("input_layernorm.weight", "post_attention_layernorm.weight"):
        out[p + n] = torch.ones(h, dtype=torch.bfloat16, device="cuda")
    return out


def make_model(model_dir, shape):
    if os.path.exists(os.path.join(model_dir, "config.json")):
        return
    s = SHAPES[shape]
    os.makedirs(model_dir, exist_ok=True)
    gen = torch.Generator(device="cuda").manual_seed(0)
    h = s["hidden_size"]
    groups = [["embed"]] + [list(range(a, min(a + LAYERS_PER_SHARD, s["num_hidden_layers"])))
                            for a in range(0, s["num_hidden_layers"], LAYERS_PER_SHARD)] + [["head"]]
    weight_map, total = {}, 0
    for k, group in enumerate(groups):
        tensors = {}
        for item in group:
            if item == "embed":
                tensors["model.embed_tokens.weight"] = torch.empty(VOCAB, h, dtype=torch.bfloat16, device="cuda").normal_(0, 0.02, generator=gen)
            elif item == "head":
                tensors["lm_head.weight"] = torch.empty(VOCAB, h, dtype=torch.bfloat16, device="cuda").normal_(0, 0.02, generator=gen)
                tensors["model.norm.weight"] = torch.ones(h, dtype=torch.bfloat16, device="cuda")
            else:
                tensors.update(layer_tensors(item, s, gen))
        name = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        cpu = {n: t.cpu() for n, t in tensors.items()}
        save_file(cpu, os.path.join(model_dir, name), metadata={"format": "pt"})
        for n, t in cpu.items():
            weight_map[n] = name
            total += t.numel() * 2
        del tensors, cpu
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    config = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=VOCAB,
                  max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                  hidden_act="silu", tie_word_embeddings=False, torch_dtype="bfloat16",
                  attention_bias=False, mlp_bias=False, bos_token_id=128000, eos_token_id=128001,
                  **s)
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tok = os.path.join(ROOT, "tests/unit/tokenizer/data/tiny_bpe")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), model_dir)
    print(f"{total / 1e9:.1f} GB of weights in {len(groups)} shards", flush=True)


if __name__ == "__main__":
    t = time.time()
    make_model(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "70b")
    print(f"model ready in {time.time() - t:.1f}s", flush=True)
