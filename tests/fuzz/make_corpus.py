#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets into tests/fuzz/corpus/<target>/ (tiny files).

Needs numpy and gguf (gguf-py). Re-running rewrites the seeds (deterministic); files that
libFuzzer found and that were added by hand (named crash-* / finding-*) are kept.
"""
import json
import os
import struct

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = np.random.RandomState(7)


def out(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def kquant_row(qtype):
    """One block of a K-quant with random quants and small f16 scales (no inf/NaN)."""
    _, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.randint(0, 256, size=nbytes).astype(np.uint8)
    half = np.array([0.01], dtype=np.float16).view(np.uint8)
    where = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}[qtype]
    for off in where:
        raw[off:off + 2] = half
    return raw


def tiny_llama_gguf(path):
    w = gguf.GGUFWriter(path, "llama")
    hidden, heads, kv, ffn, vocab = 32, 2, 1, 32, 8
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(["<|endoftext|>", "<|im_end|>", "a", "b", "ab", "c", "d", "cd"])
    w.add_token_types([3, 3, 1, 1, 1, 1, 1, 1])
    w.add_token_merges(["a b", "c d"])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_chat_template("{{ messages }}")

    def q(name, qtype, rows, cols):
        x = rng.randn(rows, cols).astype(np.float32)
        data = gguf.quants.quantize(x, qtype)
        w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)

    q("token_embd.weight", Q.Q8_0, vocab, hidden)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(hidden, dtype=np.float32))
    q("blk.0.attn_q.weight", Q.Q4_0, heads * 16, hidden)
    q("blk.0.attn_k.weight", Q.Q4_1, kv * 16, hidden)
    q("blk.0.attn_v.weight", Q.Q5_0, kv * 16, hidden)
    q("blk.0.attn_output.weight", Q.Q5_1, hidden, heads * 16)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(hidden, dtype=np.float16))
    q("blk.0.ffn_gate.weight", Q.Q8_0, ffn, hidden)
    q("blk.0.ffn_up.weight", Q.BF16, ffn, hidden)
    w.add_tensor("blk.0.ffn_down.weight", rng.randn(hidden, ffn).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for qtype in (Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K):
        row = kquant_row(qtype).reshape(1, -1)
        w.add_tensor("extra." + qtype.name, row, raw_shape=row.shape, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    tmp = os.path.join(ROOT, "tiny.tmp")
    os.makedirs(ROOT, exist_ok=True)
    tiny_llama_gguf(tmp)
    with open(tmp, "rb") as f:
        tiny = f.read()
    os.remove(tmp)
    out("fuzz_gguf", "seed-tiny-llama.gguf", tiny)
    out("fuzz_gguf", "seed-truncated.gguf", tiny[: len(tiny) // 2])
    out("fuzz_gguf", "seed-v1.gguf", b"GGUF" + struct.pack("<I", 1) + tiny[8:64])
    # Metadata of every type, including an array of arrays, and a lying string length.
    kv = b""

    def s(x):
        return struct.pack("<Q", len(x)) + x

    def key(k, t, payload):
        return s(k.encode()) + struct.pack("<I", t) + payload

    kv += key("u8", 0, b"\x07") + key("i8", 1, b"\xff") + key("u16", 2, b"\x01\x02")
    kv += key("i16", 3, b"\xfe\xff") + key("u32", 4, struct.pack("<I", 9)) + key("i32", 5, struct.pack("<i", -9))
    kv += key("f32", 6, struct.pack("<f", 0.5)) + key("bool", 7, b"\x01") + key("str", 8, s(b"hello"))
    kv += key("u64", 10, struct.pack("<Q", 1 << 40)) + key("i64", 11, struct.pack("<q", -5))
    kv += key("f64", 12, struct.pack("<d", 2.5))
    inner = struct.pack("<IQ", 0, 2) + b"\x01\x02"
    kv += key("nested", 9, struct.pack("<IQ", 9, 2) + inner + inner)
    kv += key("strs", 9, struct.pack("<IQ", 8, 2) + s(b"a") + s(b"bc"))
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 14)
    out("fuzz_gguf", "seed-all-types.gguf", header + kv)
    out("fuzz_gguf", "seed-bad-strlen.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key("k", 8, struct.pack("<Q", 1 << 50)))
    # One tensor info with 5 dims and one with an out-of-file offset.
    ti = s(b"t") + struct.pack("<I", 5) + struct.pack("<5Q", 1, 1, 1, 1, 1) + struct.pack("<IQ", 0, 0)
    out("fuzz_gguf", "seed-ndims.gguf", b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + ti + b"\0" * 32)
    ti = s(b"t") + struct.pack("<I", 1) + struct.pack("<Q", 8) + struct.pack("<IQ", 0, 1 << 20)
    out("fuzz_gguf", "seed-offset.gguf", b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + ti + b"\0" * 64)

    # safetensors
    def st(entries, data):
        h = json.dumps(entries).encode()
        return struct.pack("<Q", len(h)) + h + data

    f32 = np.arange(6, dtype=np.float32).tobytes()
    f16 = np.array([1.5, -2.0], dtype=np.float16).tobytes()
    bf16 = (np.array([3.0, -0.5], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    entries = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "h": {"dtype": "F16", "shape": [2], "data_offsets": [24, 28]},
        "b": {"dtype": "BF16", "shape": [2], "data_offsets": [28, 32]},
        "s": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
    }
    out("fuzz_safetensors", "seed-valid.safetensors", st(entries, f32 + f16 + bf16))
    out("fuzz_safetensors", "seed-i64.safetensors",
        st({"x": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8))
    out("fuzz_safetensors", "seed-offsets.safetensors",
        st({"x": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, b"\0" * 16))
    out("fuzz_safetensors", "seed-header-len.safetensors", struct.pack("<Q", 1 << 62) + b"{}")
    out("fuzz_safetensors", "seed-not-json.safetensors", struct.pack("<Q", 5) + b"{\"a\":")

    # config.json
    smol = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
            "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
            "num_key_value_heads": 3, "head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 100000,
            "max_position_embeddings": 8192, "tie_word_embeddings": True, "vocab_size": 49152,
            "rope_scaling": None}
    out("fuzz_hf_config", "seed-smollm2.json", json.dumps(smol).encode())
    llama3 = dict(smol, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    out("fuzz_hf_config", "seed-llama3.json", json.dumps(llama3).encode())
    out("fuzz_hf_config", "seed-bad.json", b'{"model_type": "llama", "hidden_size": "x", ')


if __name__ == "__main__":
    main()
