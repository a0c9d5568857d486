#!/usr/bin/env python3
"""Builds the small random-weight model fixtures of tests/data/families/ and their expectations.

For each family in FAMILIES (llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3) it
  1. writes a shrunk config.json in the shape the published checkpoints use (legacy keys:
     rope_theta, rope_scaling, rope_local_base_freq, sliding_window_pattern, ...), with every
     feature of the family switched on (see FAMILIES), and has transformers build the model from it
     with seeded random weights (initializer_range 0.1); norm weights and biases (which transformers
     initializes to constants) get seeded noise too, so that a loader that drops or mis-shifts them
     fails; the tied-embedding families get a smaller embedding (EXTRAS) so that greedy decoding
     does not just repeat the last token;
  2. saves it in fp32 as tests/data/families/<family>/hf/ (config.json, model.safetensors,
     generation_config.json, tokenizer.json + tokenizer_config.json: the tiny byte-level BPE of
     tests/unit/tokenizer/data/tiny_bpe, 335 tokens), then reloads it from disk, so the reference
     below is computed from the files exactly as committed;
  3. converts it to tests/data/families/<family>/<family>.gguf (f32 tensors) with llama.cpp's own
     convert_hf_to_gguf.py, run from a temporary directory (never copied into the repository);
  4. records with transformers in fp32, attn_implementation="eager" (soft-capping and sliding
     windows honoured exactly), for 3 prompts given as token ids (5, 40 and 100 tokens; the sliding
     windows are 16-24 tokens): the next-token logits after the full prompt (every vocab entry) and
     64 greedy tokens (argmax with the whole sequence recomputed every step, no cache, EOS ignored),
     with the top-1/top-2 logit gap of every greedy step, and writes
     tests/data/families/<family>/expected.json; where the GGUF cannot express a feature of
     config.json (EXTRAS[...]["gguf_changes"]: Mistral's and Qwen2's sliding window, Gemma's
     query_pre_attn_scalar), it also records "gguf_cases": the same outputs for config.json with
     those changes over the same weights, which is what a GGUF-only loader must reproduce;
  5. reads the GGUF back (gguf package) and checks every tensor against the HF tensor it came from,
     classifying what the converter did to it (copied, Q/K rows permuted, +1 added, fused, added,
     dropped), and writes tests/data/families/README.md (metadata keys, tensor names, converter
     changes, provenance);
  6. when llama-cpp-python is installed (optional: `pip install` of the same sdist builds it in
     about 10 minutes on 2 cores), runs each GGUF in llama.cpp and records its logit error and
     greedy agreement against gguf_cases in summary.json and the README.

Tokenizer: every family uses the tiny byte-level BPE (tessera reads byte-level BPE only, and the
C++ tests feed token ids). The converter cannot take it unchanged, so the script runs it through a
small driver that patches four vocabulary hooks and nothing that touches tensors or model
metadata:
  * TextModel.get_vocab_base_pre -> "gpt-2" (the converter identifies BPE pre-tokenizers by hashing
    the ids of a test string; a 335-token vocab matches no known hash);
  * Gemma2Model.set_vocab and Phi3MiniModel.set_vocab -> _set_vocab_gpt2() (both otherwise insist
    on a SentencePiece tokenizer.model; Gemma3Model and Qwen2Model fall back to GPT-2 BPE on their
    own when there is no tokenizer.model);
  * transformers.AutoTokenizer.from_pretrained -> PreTrainedTokenizerFast.from_pretrained
    (transformers 5 chooses the tokenizer class by model_type, e.g. Qwen2Tokenizer for qwen2,
    which adds a token and replaces the pre-tokenizer of tokenizer.json).
The GGUFs therefore carry tokenizer.ggml.model = "gpt2", tokenizer.ggml.pre = "gpt-2".

Versions used for the committed fixtures (pip, PyPI only; torch is the default PyPI wheel, run on
CPU):
  torch 2.15.0, transformers 5.24.0, safetensors 0.8.0, numpy 2.4.6, gguf 0.19.0 (PyPI; reads
  the GGUFs back), llama-cpp-python 0.3.36 sdist (vendor/llama.cpp/convert_hf_to_gguf.py, run with
  the gguf-py of that tree as it does by default: PyPI's gguf 0.19.0 lacks constants it needs),
  sentencepiece 0.2.3 (imported by the converter); optionally llama-cpp-python 0.3.36 built from
  that sdist for step 6.

Usage (from the repository root; needs the packages above, no network besides PyPI):
  python3 -m venv /tmp/fam && . /tmp/fam/bin/activate
  pip install torch==2.15.0 transformers==5.24.0 safetensors numpy gguf==0.19.0 sentencepiece
  pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp/fam/sdist
  tar -C /tmp/fam/sdist -xzf /tmp/fam/sdist/llama_cpp_python-0.3.36.tar.gz
  python3 tests/reference/make_family_fixtures.py \
      --llama-cpp /tmp/fam/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp [--only gemma3 ...]
  python3 tests/reference/make_family_fixtures.py --readme-only   # README.md from summary.json

Everything is seeded: rerunning with the same versions reproduces the files byte for byte (the
GGUF's general.* metadata included, since no name/date is derived from the environment).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

import transformers
from transformers import AutoConfig, AutoModelForCausalLM

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "families")
TOKENIZER = os.path.join(ROOT, "tests", "unit", "tokenizer", "data", "tiny_bpe")

VOCAB = 335          # tiny_bpe: 334 BPE tokens + "<tool>"; ids 0/1/2 are <|bos|>/<|eos|>/<|user|>
BOS, EOS = 0, 1
PROMPT_LENGTHS = (5, 40, 100)
GREEDY_TOKENS = 64
SEED = 1234

# Shared shape: hidden 64, 4 query heads, 2 KV heads (GQA), fp32.
COMMON = dict(vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, bos_token_id=BOS, eos_token_id=EOS, torch_dtype="float32",
              initializer_range=0.1)

# family -> (architecture, config keys, features switched on). Each family's keys are those of its
# published config.json (legacy names, as on the hub).
FAMILIES = {
    "llama": ("LlamaForCausalLM", dict(
        model_type="llama", intermediate_size=160, num_hidden_layers=2, hidden_act="silu",
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False, attention_bias=False,
        mlp_bias=False, head_dim=16,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=64)),
        ["RMSNorm", "SiLU", "GQA", "separate lm_head", "rope llama3 (factor 8, original 64)"]),
    "mistral": ("MistralForCausalLM", dict(
        model_type="mistral", intermediate_size=160, num_hidden_layers=2, hidden_act="silu",
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False, head_dim=16,
        sliding_window=16),
        ["RMSNorm", "SiLU", "GQA", "separate lm_head", "sliding_window 16 on every layer (v0.1 style)"]),
    "qwen2": ("Qwen2ForCausalLM", dict(
        model_type="qwen2", intermediate_size=160, num_hidden_layers=3, hidden_act="silu",
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False,
        use_sliding_window=True, sliding_window=16, max_window_layers=1,
        rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=64)),
        ["RMSNorm", "SiLU", "GQA", "q/k/v bias", "separate lm_head",
         "use_sliding_window: window 16 on layers >= max_window_layers=1 (layer 0 full)",
         "rope yarn (factor 4, original 64)"]),
    "qwen3": ("Qwen3ForCausalLM", dict(
        model_type="qwen3", intermediate_size=160, num_hidden_layers=2, hidden_act="silu",
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, head_dim=32,
        attention_bias=False, use_sliding_window=False, sliding_window=None, max_window_layers=2),
        ["RMSNorm", "SiLU", "GQA", "q_norm/k_norm (per head RMSNorm)", "head_dim 32 != 64/4",
         "tied lm_head"]),
    "gemma2": ("Gemma2ForCausalLM", dict(
        model_type="gemma2", intermediate_size=128, num_hidden_layers=4,
        hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh", rms_norm_eps=1e-6,
        rope_theta=10000.0, tie_word_embeddings=True, head_dim=32, query_pre_attn_scalar=24,
        sliding_window=16, attn_logit_softcapping=4.0, final_logit_softcapping=2.5,
        attention_bias=False, pad_token_id=None),
        ["RMSNorm x*(1+w)", "sandwich norms (pre/post attention and feedforward)", "GELU-tanh",
         "embedding scale sqrt(64)", "attn softcap 4.0", "final logit softcap 2.5",
         "query_pre_attn_scalar 24 (head_dim 32)", "head_dim 32 != 64/4",
         "sliding window 16 on even layers (local/global alternating)", "tied lm_head"]),
    "gemma3": ("Gemma3ForCausalLM", dict(
        model_type="gemma3_text", intermediate_size=128, num_hidden_layers=6,
        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, rope_scaling=dict(rope_type="linear", factor=2.0),
        tie_word_embeddings=True, head_dim=32, query_pre_attn_scalar=24, sliding_window=16,
        sliding_window_pattern=6, final_logit_softcapping=None, attn_logit_softcapping=None,
        attention_bias=False, pad_token_id=None),
        ["RMSNorm x*(1+w)", "sandwich norms", "q_norm/k_norm x*(1+w)", "GELU-tanh",
         "embedding scale sqrt(64)", "query_pre_attn_scalar 24 (head_dim 32)", "head_dim 32 != 64/4",
         "sliding window 16, pattern 6 (layers 0-4 local, layer 5 global)",
         "rope_theta 1e6 global, rope_local_base_freq 1e4 local",
         "rope linear factor 2 (global layers only)", "tied lm_head"]),
    "phi3": ("Phi3ForCausalLM", dict(
        model_type="phi3", intermediate_size=160, num_hidden_layers=2, hidden_act="silu",
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        original_max_position_embeddings=256, sliding_window=24, pad_token_id=None,
        resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0),
        ["RMSNorm", "SiLU", "GQA", "fused qkv_proj", "fused gate_up_proj", "separate lm_head",
         "sliding_window 24"]),
}


# Per family: the seed (chosen among a few so that greedy decoding does not settle into a loop of
# one or two tokens and the top-2 gaps stay well above fp32 noise); a factor on the embedding after init (tied embeddings make a random model
# repeat its last token: a smaller embedding lets the layers steer the argmax); and what the GGUF
# cannot carry. convert_hf_to_gguf.py writes no key for these, so a GGUF reader that follows
# llama.cpp gets another model: Mistral and Qwen2 GGUFs have no sliding window (full attention),
# and Gemma 2/3 GGUFs have no query_pre_attn_scalar (llama.cpp scales queries by 1/sqrt(head_dim)
# except for its 27B models). "gguf_cases" in expected.json are computed by transformers from the
# config with these changes, over the same weights.
EXTRAS = {
    "llama": dict(seed=2, embed_scale=1.0, gguf_changes={}),
    "mistral": dict(seed=4, embed_scale=1.0, gguf_changes={"sliding_window": None}),
    "qwen2": dict(seed=3, embed_scale=1.0, gguf_changes={"use_sliding_window": False}),
    "qwen3": dict(seed=1, embed_scale=0.5, gguf_changes={}),
    "gemma2": dict(seed=2, embed_scale=0.25, gguf_changes={"query_pre_attn_scalar": 32}),
    "gemma3": dict(seed=1, embed_scale=0.5, gguf_changes={"query_pre_attn_scalar": 32}),
    "phi3": dict(seed=4, embed_scale=1.0, gguf_changes={}),
}


def log(*args):
    print(*args, flush=True)


# --- building -------------------------------------------------------------------------------------

def family_config(family):
    arch, keys, _ = FAMILIES[family]
    cfg = dict(COMMON)
    cfg.update(keys)
    cfg["architectures"] = [arch]
    return {k: v for k, v in cfg.items()}


def perturb_constants(model, gen):
    """Norm weights start at 1 (or 0 for Gemma's 1+w) and biases at 0; give them seeded noise."""
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "norm" in name or name.endswith(".bias"):
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.2)


def copy_tokenizer(hf_dir):
    shutil.copy(os.path.join(TOKENIZER, "tokenizer.json"), hf_dir)
    with open(os.path.join(TOKENIZER, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc["tokenizer_class"] = "PreTrainedTokenizerFast"
    tc["chat_template"] = "{% for m in messages %}<|user|>{{ m['content'] }}<|eos|>{% endfor %}"
    tc["model_max_length"] = 256
    with open(os.path.join(hf_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
        f.write("\n")


def build(family, fam_dir):
    hf_dir = os.path.join(fam_dir, "hf")
    shutil.rmtree(hf_dir, ignore_errors=True)
    os.makedirs(hf_dir)
    cfg = family_config(family)
    cfg_path = os.path.join(hf_dir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    config = AutoConfig.from_pretrained(hf_dir)
    seed = EXTRAS[family]["seed"]
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed + 1)
    perturb_constants(model, gen)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(EXTRAS[family]["embed_scale"])
    model.eval()
    model.save_pretrained(hf_dir, safe_serialization=True)
    # save_pretrained writes transformers 5's config shape (rope_parameters, layer_types); put back
    # the published shape, which transformers also reads (checked by the reload below).
    cfg["transformers_version"] = transformers.__version__
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(hf_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": BOS, "eos_token_id": EOS, "do_sample": False}, f, indent=2)
        f.write("\n")
    copy_tokenizer(hf_dir)
    reloaded = AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager", dtype=torch.float32)
    reloaded.eval()
    a, b = model.state_dict(), reloaded.state_dict()
    assert a.keys() == b.keys(), (family, set(a) ^ set(b))
    for k in a:
        assert torch.equal(a[k], b[k]), (family, k)
    probe = torch.arange(3, 3 + 40).unsqueeze(0) % VOCAB
    with torch.no_grad():
        la, lb = model(probe).logits, reloaded(probe).logits
    assert torch.equal(la, lb), (family, "config.json as written changes the model",
                                 (la - lb).abs().max().item())
    return hf_dir, reloaded


# --- reference outputs ----------------------------------------------------------------------------

def prompts():
    rng = np.random.default_rng(SEED)
    out = []
    for n in PROMPT_LENGTHS:
        ids = [BOS] + [int(x) for x in rng.integers(3, VOCAB, size=n - 1)]
        out.append(ids)
    return out


def greedy(model, ids, steps):
    seq = list(ids)
    tokens, gaps, first_logits = [], [], None
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([seq])).logits[0, -1].float()
            if first_logits is None:
                first_logits = logits.clone()
            top = torch.topk(logits, 2)
            tok = int(top.indices[0])
            tokens.append(tok)
            gaps.append(float(top.values[0] - top.values[1]))
            seq.append(tok)
    return first_logits, tokens, gaps


def rel_err(a, b):
    return float(torch.linalg.norm((a - b).double()) / torch.linalg.norm(b.double()))


def model_from_config_dict(cfg, state_dict, dtype):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(cfg, f)
        config = AutoConfig.from_pretrained(tmp)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in state_dict.items()})
    return model.eval()


def reference(family, model, changes=None):
    """Reference outputs of `model`, or of its config with `changes` over the same weights."""
    cases = []
    cfg = family_config(family)
    if changes:
        cfg.update(changes)
        model = model_from_config_dict(cfg, model.state_dict(), torch.float32)
    model64 = model_from_config_dict(cfg, model.state_dict(), torch.float64)
    for ids in prompts():
        logits, tokens, gaps = greedy(model, ids, GREEDY_TOKENS)
        with torch.no_grad():
            l64 = model64(torch.tensor([ids])).logits[0, -1]
        cases.append({
            "prompt_ids": ids,
            "logits": [float(np.float32(x)) for x in logits.tolist()],
            "greedy_ids": tokens,
            "greedy_top2_gap": [round(g, 6) for g in gaps],
            "fp32_vs_fp64_rel_err": rel_err(logits, l64),
        })
    return cases


# --- conversion -----------------------------------------------------------------------------------

DRIVER = r'''
import os, runpy, sys
llama_cpp = sys.argv.pop(1)
sys.path.insert(0, llama_cpp)
sys.path.insert(1, os.path.join(llama_cpp, "gguf-py"))  # what convert_hf_to_gguf.py itself does
import conversion.base, conversion.gemma, conversion.phi
# The tiny byte-level BPE matches no pre-tokenizer hash the converter knows.
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
# These two insist on a SentencePiece tokenizer.model; the fixtures carry a byte-level BPE.
def _gpt2_vocab(self):
    self._set_vocab_gpt2()
conversion.gemma.Gemma2Model.set_vocab = _gpt2_vocab
conversion.phi.Phi3MiniModel.set_vocab = _gpt2_vocab
# transformers 5 picks the tokenizer class from model_type (Qwen2Tokenizer for qwen2/qwen3, which
# adds <|endoftext|> and its own pre-tokenizer); load tokenizer.json as it is written instead.
import transformers
transformers.AutoTokenizer.from_pretrained = staticmethod(
    lambda path, *a, **k: transformers.PreTrainedTokenizerFast.from_pretrained(path))
sys.argv[0] = os.path.join(llama_cpp, "convert_hf_to_gguf.py")
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def convert(family, hf_dir, gguf_path, llama_cpp):
    with tempfile.TemporaryDirectory() as tmp:
        driver = os.path.join(tmp, "driver.py")
        with open(driver, "w") as f:
            f.write(DRIVER)
        # The converter uses the gguf-py of its own tree (PyPI's gguf 0.19.0 lacks constants this
        # converter needs, e.g. MODEL_ARCH.DFLASH); the GGUF is read back with PyPI's gguf.
        env = dict(os.environ)
        env.pop("NO_LOCAL_GGUF", None)
        cmd = [sys.executable, driver, llama_cpp, hf_dir, "--outtype", "f32", "--outfile", gguf_path,
               # A neutral name: llama.cpp keys a vocab quirk on general.name containing "phi3"
               # (it then requires a "</s>" token).
               "--model-name", "tessera-tiny-random"]
        r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        with open(os.path.join(tmp, "log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
            raise SystemExit(f"{family}: convert_hf_to_gguf.py failed ({r.returncode})")
        warnings = [l for l in (r.stdout + r.stderr).splitlines() if "WARNING" in l]
    return warnings


# --- GGUF inspection ------------------------------------------------------------------------------

def gguf_value(field):
    import gguf
    t = field.types[0] if field.types else None
    if t == gguf.GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
    if t == gguf.GGUFValueType.ARRAY:
        n = len(field.data)
        sub = field.types[1] if len(field.types) > 1 else None
        if sub == gguf.GGUFValueType.STRING:
            return f"[{n} strings]"
        vals = [field.parts[i].tolist()[0] for i in field.data[:8]]
        return f"[{n} x {sub.name.lower()}: {vals}{' ...' if n > 8 else ''}]"
    return field.parts[field.data[0]].tolist()[0]


def permute(w, n_head, n_head_kv):
    # llama.cpp's LlamaModel.permute (HF rotate_half order -> interleaved pairs).
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def inspect_gguf(family, gguf_path, hf_model):
    import gguf
    reader = gguf.GGUFReader(gguf_path)
    meta = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        meta[name] = gguf_value(field)
    arch = meta["general.architecture"]
    cfg = hf_model.config
    hf = {k: v.detach().numpy() for k, v in hf_model.state_dict().items()}
    n_blocks = cfg.num_hidden_layers
    tmap = gguf.get_tensor_name_map(next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch), n_blocks)
    hf_of = {}
    for k in hf:
        g = tmap.get_name(k, try_suffixes=(".weight", ".bias"))
        if g is not None:
            hf_of.setdefault(g, k)
    tensors, used = [], set()
    n_head, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    for t in reader.tensors:
        data = np.array(t.data)  # numpy order: the reverse of GGUF's ne
        src = hf_of.get(t.name)
        how = "new tensor (no HF source)"
        if src is not None:
            used.add(src)
            w = hf[src]
            if w.shape != data.shape and w.size == data.size:
                w = w.reshape(data.shape)
            if w.shape == data.shape and np.array_equal(w, data):
                how = "copied"
            elif w.shape == data.shape and np.array_equal(w + np.float32(1.0), data):
                how = "copied, +1 added (Gemma x*(1+w) folded into the weight)"
            elif w.shape == data.shape and src.endswith("q_proj.weight") and \
                    np.array_equal(permute(w, n_head, n_head), data):
                how = "Q rows permuted (llama.cpp permute: rotate_half -> interleaved pairs)"
            elif w.shape == data.shape and src.endswith("k_proj.weight") and \
                    np.array_equal(permute(w, n_head, n_kv), data):
                how = "K rows permuted (llama.cpp permute: rotate_half -> interleaved pairs)"
            elif data.shape[0] < w.shape[0] and np.array_equal(w[:data.shape[0]], data):
                how = f"rows truncated {w.shape[0]} -> {data.shape[0]}"
            else:
                how = f"CHANGED (shape {w.shape} -> {data.shape})"
        entry = {"name": t.name, "shape": list(data.shape), "type": t.tensor_type.name, "hf": src, "how": how}
        if src is None and data.size <= 64:
            entry["values"] = [float(x) for x in data.reshape(-1)]
        tensors.append(entry)
    dropped = sorted(set(hf) - used)
    return meta, tensors, dropped


# --- cross-check with llama.cpp ---------------------------------------------------------------------

def llama_cpp_check(gguf_path, gguf_cases):
    """Runs the GGUF in llama.cpp (llama-cpp-python, CPU, f32 weights and KV cache): relative logit
    error against gguf_cases and how many of the 64 greedy tokens agree. None when not installed."""
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=gguf_path, n_ctx=256, n_batch=256, n_threads=os.cpu_count() or 1,
                verbose=False, logits_all=True, flash_attn=False, type_k=0, type_v=0)
    out = []
    for c in gguf_cases:
        ids = c["prompt_ids"]
        llm.reset()
        llm.eval(ids)
        got = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
        ref = np.array(c["logits"], dtype=np.float64)
        tokens = []
        for _ in range(GREEDY_TOKENS):
            t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            tokens.append(t)
            llm.eval([t])
        agree = next((i for i, (a, b) in enumerate(zip(tokens, c["greedy_ids"])) if a != b), GREEDY_TOKENS)
        out.append({"rel_err": float("%.3g" % (np.linalg.norm(got - ref) / np.linalg.norm(ref))),
                    "greedy_agree": agree})
    del llm
    return out


# --- main -----------------------------------------------------------------------------------------

def file_size(path):
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", help="vendor/llama.cpp of the llama-cpp-python sdist")
    ap.add_argument("--only", nargs="*", default=None, help="families to rebuild (default: all)")
    ap.add_argument("--readme-only", action="store_true", help="rewrite README.md from summary.json")
    args = ap.parse_args()
    if args.readme_only:
        with open(os.path.join(OUT, "summary.json")) as f:
            write_readme(json.load(f))
        return
    if not args.llama_cpp:
        ap.error("--llama-cpp is required")
    llama_cpp = os.path.abspath(args.llama_cpp)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    torch.use_deterministic_algorithms(True)
    import gguf
    versions = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "numpy": np.__version__, "gguf": getattr(gguf, "__version__", None) or _pkg_version("gguf"),
        "safetensors": _pkg_version("safetensors"),
        "llama_cpp_python_sdist": os.path.basename(os.path.dirname(os.path.dirname(llama_cpp))),
    }
    families = args.only or list(FAMILIES)
    summary_path = os.path.join(OUT, "summary.json")
    summary = json.load(open(summary_path)) if os.path.exists(summary_path) else {}
    for family in families:
        log(f"== {family}")
        fam_dir = os.path.join(OUT, family)
        os.makedirs(fam_dir, exist_ok=True)
        hf_dir, model = build(family, fam_dir)
        cases = reference(family, model)
        changes = EXTRAS[family]["gguf_changes"]
        gguf_cases = reference(family, model, changes) if changes else cases
        gguf_path = os.path.join(fam_dir, f"{family}.gguf")
        warnings = convert(family, hf_dir, gguf_path, llama_cpp)
        meta, tensors, dropped = inspect_gguf(family, gguf_path, model)
        checked = llama_cpp_check(gguf_path, gguf_cases)
        expected = {
            "generator": "tests/reference/make_family_fixtures.py",
            "family": family,
            "architecture": FAMILIES[family][0],
            "versions": versions,
            "attn_implementation": "eager",
            "dtype": "float32",
            "greedy": "argmax over the full sequence recomputed each step (no cache), EOS ignored",
            "vocab_size": VOCAB,
            "cases": cases,
            "gguf_config_changes": changes,
            "gguf_cases": gguf_cases,
        }
        with open(os.path.join(fam_dir, "expected.json"), "w") as f:
            json.dump(expected, f, indent=1)
            f.write("\n")
        params = sum(p.numel() for p in model.parameters())
        summary[family] = {
            "architecture": FAMILIES[family][0], "features": FAMILIES[family][2], "params": params,
            "layers": model.config.num_hidden_layers,
            "safetensors_bytes": file_size(os.path.join(hf_dir, "model.safetensors")),
            "gguf_bytes": file_size(gguf_path),
            "logits_norm": [round(float(np.linalg.norm(c["logits"])), 4) for c in cases],
            "distinct_greedy": [len(set(c["greedy_ids"])) for c in cases],
            "min_greedy_gap": [round(min(c["greedy_top2_gap"]), 6) for c in cases],
            "fp32_vs_fp64_rel_err": [float("%.3g" % c["fp32_vs_fp64_rel_err"]) for c in cases],
            "gguf_config_changes": changes,
            "gguf_distinct_greedy": [len(set(c["greedy_ids"])) for c in gguf_cases],
            "gguf_min_greedy_gap": [round(min(c["greedy_top2_gap"]), 6) for c in gguf_cases],
            "seed": EXTRAS[family]["seed"], "embed_scale": EXTRAS[family]["embed_scale"],
            "llama_cpp_check": checked, "llama_cpp_python": _pkg_version_or_none("llama_cpp_python"),
            "gguf_metadata": {k: v for k, v in meta.items() if not k.startswith("tokenizer.ggml.")
                              or not isinstance(v, str) or not v.startswith("[")},
            "gguf_tensors": tensors, "dropped_hf_tensors": dropped, "converter_warnings": warnings,
            "versions": versions,
        }
    with open(summary_path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    write_readme(summary)
    print_table(summary)


README_HEAD = """# Model family fixtures

Small random-weight models, one per family, with the outputs transformers gives for them. They are
generated by `tests/reference/make_family_fixtures.py` (its docstring has the exact commands) and
committed, so CI needs no torch. Do not edit by hand: rerun the script.

Per family `<family>/`:

- `hf/`: `config.json` (the shape published checkpoints use: `rope_theta`, `rope_scaling`,
  `rope_local_base_freq`, `sliding_window_pattern`, ...; transformers 5 reads it, the script checks
  that the reloaded model is bit-identical to the one it built), `model.safetensors` (fp32),
  `generation_config.json`, `tokenizer.json` + `tokenizer_config.json` (the tiny byte-level BPE of
  `tests/unit/tokenizer/data/tiny_bpe`, 335 tokens; `vocab_size` is 335 everywhere).
- `<family>.gguf`: the same weights converted by llama.cpp's `convert_hf_to_gguf.py --outtype f32`.
- `expected.json`: for 3 prompts given as token ids (5, 40 and 100 tokens, all starting with BOS=0;
  the sliding windows are 16-24 tokens), computed by transformers in fp32 with
  `attn_implementation="eager"`:
  - `cases[i].logits`: next-token logits after the whole prompt, all 335 entries;
  - `cases[i].greedy_ids`: 64 greedy tokens (argmax, the whole sequence recomputed each step, EOS
    ignored); `greedy_top2_gap[j]` is the top-1 minus top-2 logit at step j (a flip is only
    excusable where that gap is within the logit error);
  - `fp32_vs_fp64_rel_err`: ||fp32 - fp64|| / ||fp64|| of the logits in transformers itself (the
    noise floor; about 5e-7 everywhere, well under the 1e-4 budget);
  - `gguf_config_changes` / `gguf_cases`: what the GGUF can express differs from config.json for some
    families (see below); `gguf_cases` are transformers' outputs for config.json with those changes
    over the same weights, i.e. what a loader that reads only the GGUF must produce. Where there are
    no changes `gguf_cases` equals `cases`.
- `summary.json` (next to this file): every GGUF metadata key and tensor, with the HF tensor each came
  from and what the converter did to it (checked numerically by the script).

## Tokenizer and the converter

tessera reads byte-level BPE only, so every fixture carries the tiny byte-level BPE. The converter
does not accept it unchanged; the script runs `convert_hf_to_gguf.py` from a temporary directory
through a driver that patches four vocabulary hooks and nothing that touches tensors or model
metadata: `TextModel.get_vocab_base_pre` returns `"gpt-2"` (a 335-token vocab matches no known
pre-tokenizer hash), `Gemma2Model.set_vocab` and `Phi3MiniModel.set_vocab` call `_set_vocab_gpt2()`
(they otherwise require a SentencePiece `tokenizer.model`), and `AutoTokenizer.from_pretrained` is
`PreTrainedTokenizerFast.from_pretrained` (transformers 5 picks `Qwen2Tokenizer` from
`model_type`, which adds `<|endoftext|>` and replaces the pre-tokenizer). Every GGUF therefore has
`tokenizer.ggml.model = "gpt2"`, `tokenizer.ggml.pre = "gpt-2"`, bos 0, eos 1, and the chat template
of `tokenizer_config.json`. The converter runs with the `gguf-py` of its own tree (PyPI's `gguf`
0.19.0 lacks constants it needs); the files are read back with PyPI's `gguf`.

## What the converter does (critical for the GGUF loader)

Checked tensor by tensor against the safetensors (see `summary.json`, field `how`):

- **llama, mistral** (GGUF architecture `llama` for both): `attn_q`/`attn_k` rows are permuted
  (llama.cpp's `permute`: within each head the rotate-half order `[x0..x(d/2-1), x(d/2)..x(d-1)]`
  becomes interleaved pairs; for `attn_k` the head count is the KV head count). Undo it. Everything
  else is copied. The Q/K of every other family here are **not** permuted (llama.cpp uses NeoX-style
  rope for them).
- **llama3 rope scaling** is not written as `rope.scaling.*` keys: the converter adds a tensor
  `rope_freqs.weight` [head_dim/2] of per-frequency divisors (1 for high frequencies, `factor` for low
  ones, smoothed between), computed from `factor`, `low_freq_factor`, `high_freq_factor` and
  `original_max_position_embeddings`; inv_freq[i] = base^(-2i/d) / rope_freqs[i].
- **mistral**: no sliding-window key at all (the GGUF says `llama`, full attention).
- **qwen2**: q/k/v biases are copied as `attn_{q,k,v}.bias`; yarn is written as
  `rope.scaling.type = yarn`, `rope.scaling.factor`, `rope.scaling.original_context_length`
  (beta_fast/beta_slow/attention factor only when config.json has them; transformers' defaults are
  32, 1 and 0.1*ln(factor)+1); `use_sliding_window`, `sliding_window` and `max_window_layers` are
  **not** written (full attention in the GGUF).
- **qwen3**: `attn_q_norm` / `attn_k_norm` [head_dim] copied; tied: no `output.weight`.
- **gemma2, gemma3**: the converter **adds 1 to every `*norm.weight`** (attn_norm, ffn_norm =
  pre_feedforward_layernorm, post_attention_norm, post_ffw_norm, output_norm, and Gemma 3's
  attn_q_norm/attn_k_norm): GGUF norms multiply by w, HF's by (1+w). No `output.weight` (tied, and
  the converter drops `lm_head.weight` even when present). `query_pre_attn_scalar` is **not**
  written. Embedding scaling by sqrt(hidden) is implied by the architecture, not stored.
- **gemma2**: `attn_logit_softcapping`, `final_logit_softcapping`, `attention.sliding_window` are
  written; which layers slide is not (llama.cpp and transformers both: even layers local, odd global).
- **gemma3**: `rope.freq_base` is the global theta, `rope.freq_base_swa` the local one
  (`rope_local_base_freq`); `rope.scaling.type = linear` / `factor` are written once (transformers
  applies them to the global layers only); `attention.sliding_window` is written but the pattern is
  not (llama.cpp assumes every 6th layer global, which is why this fixture has 6 layers with
  `sliding_window_pattern` 6). The converter also warns about duplicated keys it writes twice with
  the same value.
- **phi3**: the fused `qkv_proj` and `gate_up_proj` stay fused: `attn_qkv.weight` [(n_head +
  2*n_kv)*head_dim, hidden] (rows q, then k, then v) and `ffn_up.weight` [2*intermediate, hidden]
  (rows gate, then up); there is no `ffn_gate`. `rope.scaling.original_context_length`,
  `rope.dimension_count` and `attention.sliding_window` are written. Note that llama.cpp itself
  ignores the window for phi3 ("Phi SWA is currently disabled", src/models/phi3.cpp): it runs full
  attention. `gguf_cases` follow the file (window 24, as transformers), so they equal `cases`.

## llama.cpp cross-check, read

- llama, mistral, qwen2, qwen3: llama.cpp matches `gguf_cases` to about 1e-6, which confirms the
  permutes, `rope_freqs.weight`, yarn, the biases and q/k norms, and that the Mistral/Qwen2 GGUFs
  mean full attention.
- gemma2, gemma3: 3e-4 to 6e-4 with all 64 greedy tokens equal. ggml's CPU GELU goes through an
  fp16 lookup table (`GGML_GELU_FP16` in ggml-cpu/vec.h), which accounts for that; llama.cpp's
  query scale 1/sqrt(head_dim) (no `query_pre_attn_scalar` in the GGUF) is what `gguf_cases` use.
- phi3: the 5-token prompt (shorter than the window) matches to 4e-7; the 40- and 100-token ones do
  not, because llama.cpp drops Phi-3's sliding window (transformers with `sliding_window: null`
  matches llama.cpp to 5e-7 on them).
"""


def write_readme(summary):
    import re
    lines = [README_HEAD, "## Families\n"]
    lines.append("| family | architecture | layers | params | safetensors | gguf | features switched on |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for fam, s in summary.items():
        lines.append(f"| {fam} | {s['architecture']} | {s['layers']} | {s['params']} | "
                     f"{s['safetensors_bytes'] / 1024:.0f} KiB | {s['gguf_bytes'] / 1024:.0f} KiB | "
                     f"{'; '.join(s['features'])} |")
    lines.append("")
    lines.append("Per prompt (5/40/100 tokens): logits norm, distinct tokens among the 64 greedy ones, "
                 "smallest top-1/top-2 logit gap over the greedy steps, and the same two for gguf_cases.\n")
    lines.append("| family | seed, embedding factor | logits norm | distinct greedy | min top-2 gap | "
                 "fp32 vs fp64 | GGUF config changes | gguf_cases distinct | gguf_cases min gap |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for fam, s in summary.items():
        lines.append(f"| {fam} | {s['seed']}, {s['embed_scale']} | {s['logits_norm']} | {s['distinct_greedy']} | "
                     f"{s['min_greedy_gap']} | {s['fp32_vs_fp64_rel_err']} | "
                     f"{json.dumps(s['gguf_config_changes']) if s['gguf_config_changes'] else '-'} | "
                     f"{s['gguf_distinct_greedy']} | {s['gguf_min_greedy_gap']} |")
    lines.append("\nCross-check: each GGUF run by llama.cpp itself (llama-cpp-python built from the same sdist, "
                 "CPU, f32 weights and KV cache) against `gguf_cases`: relative logit error and how many of "
                 "the 64 greedy tokens agree, per prompt. Not part of CI; it shows that the GGUFs and "
                 "`gguf_cases` describe the same models.\n")
    lines.append("| family | llama.cpp vs gguf_cases (rel err, greedy agree) |")
    lines.append("| --- | --- |")
    for fam, s in summary.items():
        chk = s.get("llama_cpp_check")
        txt = ", ".join(f"{c['rel_err']:.2g} / {c['greedy_agree']}" for c in chk) if chk else "not run"
        lines.append(f"| {fam} | {txt} |")
    for fam, s in summary.items():
        lines.append(f"\n### {fam}\n")
        lines.append("GGUF metadata (tokenizer arrays omitted):\n")
        lines.append("```")
        for k, v in s["gguf_metadata"].items():
            if k.startswith("tokenizer.chat_template"):
                v = "(tokenizer_config.json's template)"
            lines.append(f"{k} = {v}")
        lines.append("```\n")
        lines.append("| GGUF tensor (N = layer) | shape (numpy order) | HF tensor | converter |")
        lines.append("| --- | --- | --- | --- |")
        seen = set()
        for t in s["gguf_tensors"]:
            g = re.sub(r"^blk\.\d+\.", "blk.N.", t["name"])
            h = re.sub(r"\.layers\.\d+\.", ".layers.N.", t["hf"] or "-")
            key = (g, h, t["how"])
            if key in seen:
                continue
            seen.add(key)
            how = t["how"] + (f": {t['values']}" if "values" in t else "")
            lines.append(f"| `{g}` | {t['shape']} | `{h}` | {how} |")
        if s["dropped_hf_tensors"]:
            lines.append(f"\nNot in the GGUF: {', '.join('`%s`' % d for d in s['dropped_hf_tensors'])} "
                         "(tied to the embedding; not stored in model.safetensors either).")
    v = next(iter(summary.values()))["versions"]
    lines.append("\n## Provenance\n")
    lines.append(", ".join(f"{k} {val}" for k, val in v.items()) + ".")
    lines.append("Regenerate: see the docstring of `tests/reference/make_family_fixtures.py`.")
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _pkg_version_or_none(name):
    try:
        return _pkg_version(name)
    except Exception:
        return None


def _pkg_version(name):
    from importlib.metadata import version
    return version(name)


def print_table(summary):
    log("")
    log(f"{'family':8} {'params':>7} {'st KiB':>7} {'gguf KiB':>8} {'logits norm (5/40/100)':>26} "
        f"{'distinct greedy':>16} {'min gap':>22} {'fp32 vs fp64':>28}")
    total = 0
    for fam, s in summary.items():
        total += s["safetensors_bytes"] + s["gguf_bytes"]
        log(f"{fam:8} {s['params']:>7} {s['safetensors_bytes'] / 1024:>7.0f} {s['gguf_bytes'] / 1024:>8.0f} "
            f"{str(s['logits_norm']):>26} {str(s['distinct_greedy']):>16} {str(s['min_greedy_gap']):>22} "
            f"{str(s['fp32_vs_fp64_rel_err']):>28}")
    log(f"total weights: {total / 1024 / 1024:.2f} MiB")


if __name__ == "__main__":
    main()
