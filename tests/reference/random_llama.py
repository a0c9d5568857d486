#!/usr/bin/env python3
"""A Llama-3-8B-shaped model with random weights, initialized by transformers on the GPU and saved
as bf16 safetensors with the tiny test tokenizer (the GPU-host checks give prompts as token ids).
Nothing is done when MODEL_DIR already holds one.

usage: random_llama.py MODEL_DIR
"""
import os, shutil, sys, time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_model(model_dir):
    if os.path.exists(os.path.join(model_dir, "config.json")):
        return
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(model_dir, safe_serialization=True)
    tok = os.path.join(ROOT, "tests/unit/tokenizer/data/tiny_bpe")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), model_dir)
    del model
    torch.cuda.empty_cache()


if __name__ == "__main__":
    t = time.time()
    make_model(sys.argv[1])
    print(f"model ready in {time.time() - t:.1f}s", flush=True)
