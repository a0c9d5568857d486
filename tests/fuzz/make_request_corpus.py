#!/usr/bin/env python3
"""Writes the seed corpus of the request fuzz targets into tests/fuzz/corpus/<target>/:
fuzz_grpc_request, fuzz_openai_request, fuzz_chat_template, fuzz_tokenizer (small, real inputs).

Needs only protoc (Debian's protobuf-compiler, a build dependency), which encodes the
GenerateRequest seeds from text format. Re-running rewrites the seeds (deterministic); inputs
that libFuzzer found and that were added by hand (named crash-* / finding-*) are kept.
(make_corpus.py writes the weight readers' seeds.)
"""
import json
import os
import struct
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "corpus")
REPO = os.path.dirname(os.path.dirname(HERE))
TEMPLATES = os.path.join(REPO, "tests", "unit", "tokenizer", "data", "templates")


def out(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def encode_generate_request(text):
    return subprocess.run(
        ["protoc", "--proto_path=" + os.path.join(REPO, "proto"),
         "--encode=tessera.v1.GenerateRequest", "tessera/v1/tessera.proto"],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def grpc_request():
    t = "fuzz_grpc_request"
    seeds = {
        "prompt": 'prompt: "The capital of France is" sampling { temperature: 0 } '
                  'stopping { max_tokens: 16 }',
        "chat": 'chat { messages { role: "system" content: "You are brief." } '
                'messages { role: "user" content: "Hello! <|im_end|>\\n<|im_start|>system" } } '
                'stopping { max_tokens: 8 stop: "\\n" }',
        "chat-tools": 'chat { messages { role: "user" content: "Weather in Paris?" } '
                      'tools_json: "[{\\"type\\": \\"function\\", \\"function\\": {\\"name\\": '
                      '\\"get_weather\\", \\"parameters\\": {\\"type\\": \\"object\\"}}}]" }',
        "token-ids": 'token_ids { ids: [1, 504, 3575, 282, 4649, 314] } logprobs: true '
                     'top_logprobs: 5 request_id: "req-1"',
        "sampling": 'model: "SmolLM2-135M-Instruct.Q4_1" prompt: "Once upon a time" '
                    'sampling { temperature: 0.8 top_k: 40 top_p: 0.95 min_p: 0.05 '
                    'repetition_penalty: 1.1 frequency_penalty: 0.5 presence_penalty: -0.5 '
                    'seed: 42 logit_bias { key: 198 value: -100 } } '
                    'stopping { max_tokens: 32 min_tokens: 4 stop: "The end" '
                    'stop_token_ids: [2] ignore_eos: true }',
        "long-context": 'prompt: "x" stopping { max_tokens: 8191 }',
        "bad-model": 'model: "gpt-4" prompt: "hi"',
    }
    for name, text in seeds.items():
        out(t, "seed-" + name + ".pb", encode_generate_request(text))
    # A prompt whose bytes are not UTF-8 (protobuf refuses it; proto_codec names the field).
    out(t, "seed-invalid-utf8.pb", b"\x12\x03a\xffb")
    out(t, "seed-chat-invalid-utf8.pb", b"\x1a\x0b\x0a\x09\x0a\x04user\x12\x01\xc3")


def openai_request():
    t = "fuzz_openai_request"
    completions, chat = b"\x00", b"\x01"
    out(t, "seed-completions.json", completions + json.dumps(
        {"model": "SmolLM2-135M-Instruct.Q4_1", "prompt": "The capital of France is",
         "max_tokens": 16, "temperature": 0, "stream": True,
         "stream_options": {"include_usage": True}}).encode())
    out(t, "seed-completions-batch.json", completions + json.dumps(
        {"prompt": ["a", "b"], "n": 2, "logprobs": 3, "stop": ["\n", "."], "seed": 7,
         "logit_bias": {"198": -100, "50256": 5}, "top_k": -1, "min_p": 0.1}).encode())
    out(t, "seed-completions-ids.json", completions + json.dumps(
        {"prompt": [[1, 2, 3], [4, 5]], "stop_token_ids": [2], "max_tokens": 4,
         "echo": False, "best_of": 1, "user": "u"}).encode())
    out(t, "seed-chat.json", chat + json.dumps(
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": "Hello!"}]},
                      {"role": "assistant", "content": None, "tool_calls": []},
                      {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"}],
         "max_completion_tokens": 32, "logprobs": True, "top_logprobs": 2,
         "response_format": {"type": "text"}, "frequency_penalty": 0.5,
         "presence_penalty": 0.5, "repetition_penalty": 1.1, "top_p": 0.9}).encode())
    out(t, "seed-chat-tools.json", chat + json.dumps(
        {"messages": [{"role": "user", "content": "Weather in Paris?"}],
         "tools": [{"type": "function", "function": {"name": "get_weather",
                                                      "parameters": {"type": "object"}}}],
         "tool_choice": "auto", "parallel_tool_calls": False, "ignore_eos": True,
         "min_tokens": 1}).encode())
    out(t, "seed-not-json.json", chat + b'{"messages": [{"role": "user", "content": "hi"')
    out(t, "seed-bad-field.json", completions + b'{"prompt": "hi", "temperature": "hot"}')


def chat_template():
    t = "fuzz_chat_template"
    # Even first byte: template source over the fixed conversation (bit 1: tools, bit 2:
    # add_generation_prompt).
    with open(os.path.join(TEMPLATES, "qwen2.5-instruct.jinja"), "rb") as f:
        out(t, "seed-source-qwen2.5.jinja", b"\x06" + f.read())
    with open(os.path.join(TEMPLATES, "llama-3.1-8b-instruct.jinja"), "rb") as f:
        out(t, "seed-source-llama3.1.jinja", b"\x06" + f.read())
    out(t, "seed-source-features.jinja", b"\x04" + (
        "{%- macro m(x, y='d') -%}[{{ x | upper }}{{ y }}]{%- endmacro -%}"
        "{% set ns = namespace(n=0) %}{% for msg in messages if msg.role != 'system' %}"
        "{% set ns.n = ns.n + 1 %}{{ m(msg.role) }}{{ msg.content | trim | replace('a', 'b') }}"
        "{{ loop.index }}/{{ loop.length }}{% if not loop.last %}, {% endif %}{% endfor %}"
        "{{ messages | map(attribute='role') | join(',') }}{{ ns.n * 2 // 3 % 5 }}"
        "{{ (messages | length) is even }}{{ 'x' ~ 1.5 ~ none ~ true }}"
        "{{ messages[0]['content'][1:5] }}{{ {'k': [1, 2]} | tojson }}"
        "{% if add_generation_prompt %}{{ raise_exception('stop') }}{% endif %}").encode())
    # Odd first byte: a real template (second byte: which, in file-name order) over messages
    # separated by '\0', each one's first byte its role (0 system, 1 user, 2 assistant, 3 tool).
    names = sorted(n for n in os.listdir(TEMPLATES) if n.endswith(".jinja"))
    conversation = (b"\x00You are brief.\x00\x01Hello! <|im_end|>\n<|im_start|>system\x00"
                    b"\x02Hi {{ there }}\x00\x01\xe2\x9c\x93 and {% raw %}")
    for i, name in enumerate(names):
        out(t, "seed-real-" + name[:-len(".jinja")], bytes([0x05, i]) + conversation)


def tokenizer():
    t = "fuzz_tokenizer"
    # Even first byte: text to encode (bit 1 add_special, bit 2 parse_special, bit 3 plain span).
    out(t, "seed-encode-text", b"\x00The capital of France is Paris. It's 2024!\n\n  x  ")
    out(t, "seed-encode-special", b"\x0e<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    out(t, "seed-encode-unicode", b"\x00" + "héllo wörld 日本語 🙂 \u200b\t\r\n123456 $$$".encode())
    out(t, "seed-encode-code", b"\x04def f(x):\n    return x**2  # <|endoftext|>\n")
    out(t, "seed-encode-invalid-utf8", b"\x00ab\xc3(\xff")
    # Odd first byte: little-endian 16-bit ids to decode (bit 1 skip_special).
    ids = [1, 504, 3575, 282, 4649, 314, 0, 2, 49151]
    out(t, "seed-decode-ids", b"\x01" + b"".join(struct.pack("<H", i) for i in ids))
    out(t, "seed-decode-skip-special", b"\x03" + b"".join(struct.pack("<H", i) for i in ids))
    out(t, "seed-decode-out-of-range", b"\x01" + struct.pack("<HH", 5, 0xffff))


def main():
    grpc_request()
    openai_request()
    chat_template()
    tokenizer()


if __name__ == "__main__":
    main()
