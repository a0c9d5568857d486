#!/usr/bin/env python3
"""Random-weight models in the shapes of published 4-9B checkpoints, one per family tessera serves,
initialized by transformers on the GPU in bf16 and saved as bf16 safetensors with the tiny test
tokenizer (the GPU-host checks give prompts as token ids; every vocab covers the ids they use).

config.json is written back in the published (legacy-key) shape after save_pretrained, as
make_family_fixtures.py does for the small fixtures: that is what checkpoints on the hub carry and
what tessera reads; transformers reads it to the same model. Special token ids are those of the
tiny tokenizer's vocabulary (tessera refuses an eos id outside it; Phi3Config's default eos is
32000), and generation_config.json carries only them.

  llama    Llama-3-8B: 32 layers, 32 / 8 heads, d 128, vocab 128256
  mistral  Mistral-7B-v0.1: 32 layers, 32 / 8 heads, d 128, sliding window 4096 on every layer
  qwen2    Qwen2-7B: 28 layers, 28 / 4 heads (GQA group 7), d 128, q/k/v bias, vocab 152064
  qwen3    Qwen3-8B: 36 layers, 32 / 8 heads, d 128, q/k head norms, vocab 151936
  gemma2   Gemma-2-9B: 42 layers, 16 / 8 heads, d 256, attention soft-cap 50, final soft-cap 30,
           window 4096 on even layers, query_pre_attn_scalar 256, vocab 256000, tied
  gemma3   Gemma-3-4B (text, Gemma3ForCausalLM): 34 layers, 8 / 4 heads, d 256, q/k norms, window
           1024 on 5 of 6 layers, local rope theta 1e4 / global 1e6 with linear scaling 8, vocab
           262208, tied
  phi3     Phi-3-mini-4k: 32 layers, 32 / 32 heads, d 96, fused qkv and gate_up, window 2047

usage: random_family.py FAMILY MODEL_DIR      (nothing is done when MODEL_DIR holds a model)
"""
import json, os, shutil, sys, time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# family -> (architecture, config keys as the published config.json has them)
FAMILIES = {
    "llama": ("LlamaForCausalLM", dict(
        model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
        max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False)),
    "mistral": ("MistralForCausalLM", dict(
        model_type="mistral", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
        max_position_embeddings=32768, rope_theta=10000.0, rms_norm_eps=1e-5, hidden_act="silu",
        sliding_window=4096, tie_word_embeddings=False)),
    "qwen2": ("Qwen2ForCausalLM", dict(
        model_type="qwen2", hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
        use_sliding_window=False, sliding_window=131072, max_window_layers=28,
        tie_word_embeddings=False)),
    "qwen3": ("Qwen3ForCausalLM", dict(
        model_type="qwen3", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
        max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
        attention_bias=False, use_sliding_window=False, sliding_window=None, max_window_layers=36,
        tie_word_embeddings=False)),
    "gemma2": ("Gemma2ForCausalLM", dict(
        model_type="gemma2", hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, vocab_size=256000,
        max_position_embeddings=8192, rope_theta=10000.0, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh",
        query_pre_attn_scalar=256, sliding_window=4096, attn_logit_softcapping=50.0,
        final_logit_softcapping=30.0, attention_bias=False, tie_word_embeddings=True,
        pad_token_id=0, bos_token_id=2, eos_token_id=1)),
    "gemma3": ("Gemma3ForCausalLM", dict(
        model_type="gemma3_text", hidden_size=2560, intermediate_size=10240, num_hidden_layers=34,
        num_attention_heads=8, num_key_value_heads=4, head_dim=256, vocab_size=262208,
        max_position_embeddings=131072, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling=dict(rope_type="linear", factor=8.0), rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=256, sliding_window=1024,
        sliding_window_pattern=6, final_logit_softcapping=None, attn_logit_softcapping=None,
        attention_bias=False, tie_word_embeddings=True, pad_token_id=0, bos_token_id=2,
        eos_token_id=1)),
    "phi3": ("Phi3ForCausalLM", dict(
        model_type="phi3", hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=32064,
        max_position_embeddings=4096, original_max_position_embeddings=4096, rope_theta=10000.0,
        rms_norm_eps=1e-5, hidden_act="silu", sliding_window=2047, tie_word_embeddings=False,
        pad_token_id=None, bos_token_id=1, eos_token_id=2, resid_pdrop=0.0, embd_pdrop=0.0,
        attention_dropout=0.0)),
}

# The attention implementation transformers must run for the family's math: eager where sdpa
# would drop a feature (Gemma 2's attention soft-cap).
ATTN_IMPL = {"gemma2": "eager"}


def window(family):
    """The family's sliding window (None: full attention on every layer)."""
    keys = FAMILIES[family][1]
    if keys.get("use_sliding_window") is False:
        return None
    return keys.get("sliding_window")


def config_dict(family):
    arch, keys = FAMILIES[family]
    cfg = dict(keys, architectures=[arch], torch_dtype="bfloat16")
    return cfg


def make_model(family, model_dir, seed=0):
    """Builds, saves and returns (model on the GPU in bf16, seconds to build, seconds to save);
    the model is None when model_dir already holds one."""
    if os.path.exists(os.path.join(model_dir, "config.json")):
        return None, 0.0, 0.0
    os.makedirs(model_dir, exist_ok=True)
    cfg = config_dict(family)
    cfg_path = os.path.join(model_dir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    config = AutoConfig.from_pretrained(model_dir)
    t = time.time()
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16, attn_implementation=ATTN_IMPL.get(family, "sdpa"))
    model.eval()
    torch.cuda.synchronize()
    built = time.time() - t
    t = time.time()
    model.save_pretrained(model_dir, safe_serialization=True)
    cfg["transformers_version"] = transformers.__version__
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(model_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": cfg.get("bos_token_id", 1), "eos_token_id": cfg.get("eos_token_id", 2)}, f)
    tok = os.path.join(ROOT, "tests/unit/tokenizer/data/tiny_bpe")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), model_dir)
    return model, built, time.time() - t


if __name__ == "__main__":
    model, built, saved = make_model(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[1]}: built in {built:.1f}s, saved in {saved:.1f}s", flush=True)
