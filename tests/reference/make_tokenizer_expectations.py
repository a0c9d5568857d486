#!/usr/bin/env python3
"""Expected token ids for tessera's tokenizer tests, from the Hugging Face `tokenizers` library.

tessera's tokenizer must agree with HF tokenizers id for id. This script is where the expected ids
in tests/unit/tokenizer come from; rerun it and paste its output when the tests' inputs change.

  smollm2      Rebuilds SmolLM2's tokenizer from the GGUF's vocab and merges with the structure of
               SmolLM2's tokenizer.json (BPE; pre-tokenizer Sequence[Digits(individual_digits),
               ByteLevel(add_prefix_space=False, use_regex=True)]; ByteLevel decoder; control
               tokens as special added tokens) and prints the C++ table of expected ids for
               tests/unit/tokenizer/smollm2_tokenizer_test.cc. --save-dir also writes the result as
               an HF directory (tokenizer.json, tokenizer_config.json), useful for comparing the
               GGUF and HF loading paths by hand.

  tiny-fixture Trains a tiny byte-level BPE (Split regex then ByteLevel, added special and
               non-special tokens, a BOS-adding post-processor), writes it with
               tokenizer_config.json and generation_config.json to tests/unit/tokenizer/data/
               tiny_bpe/, and prints the C++ table of expected ids for hf_vocab_test.cc.

Needs: pip install tokenizers gguf numpy (no torch).
"""

import argparse
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from tokenizers.trainers import BpeTrainer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_GGUF = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TINY_DIR = os.path.join(REPO, "tests", "unit", "tokenizer", "data", "tiny_bpe")

# Inputs for the SmolLM2 table: (test name, text). Chosen to exercise every branch of the GPT-2
# regex, the individual-digit split, multi-byte UTF-8 of every length and special tokens.
SMOLLM2_CASES = [
    ("Empty", ""),
    ("HelloWorld", "Hello world"),
    ("Sentence", "The quick brown fox jumps over the lazy dog."),
    ("LeadingSpace", " leading space"),
    ("TrailingSpaces", "trailing spaces   "),
    ("WhitespaceRun", "a     b\t\t c"),
    ("Newlines", "line one\nline two\n\n\nline five\r\n"),
    ("OnlyNewlines", "\n\n"),
    ("Contractions", "I'm sure you'll see they've done it, didn't they? It's John's."),
    ("UpperContractions", "I'M SURE IT'S FINE"),
    ("Integer", "12345"),
    ("Decimal", "3.14159"),
    ("NumbersInText", "In 2024, 1,000,000 people paid $9.99 each (50% off)."),
    ("Code", "def add(a, b):\n    return a + b  # sum\n"),
    ("CodeBraces", "for (int i = 0; i < n; ++i) { x[i] = i * 2; }"),
    ("Json", "{\"key\": [1, 2, 3], \"ok\": true}"),
    ("Url", "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct?x=1&y=2"),
    ("Cjk", "你好，世界！今天天气很好。"),
    ("Japanese", "こんにちは、カタカナとひらがな。"),
    ("Korean", "안녕하세요 세계"),
    ("Emoji", "I love 🍕 and 🚀!"),
    ("EmojiZwj", "family: 👨‍👩‍👧‍👦 thumbs: 👍🏽"),
    ("CombiningMarks", "e\u0301 a\u0308 n\u0303 (decomposed) vs é ä ñ"),
    ("Arabic", "مرحبا بالعالم"),
    ("Hebrew", "שלום עולם"),
    ("MathSymbols", "∀x ∈ ℝ: x² ≥ 0, ∑ᵢ aᵢ ≈ π"),
    ("UnicodeDigits", "٣٤٥ and ５６ and ²"),
    ("ChatTurn", "<|im_start|>user\nhi<|im_end|>"),
    ("ChatConversation",
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
     "<|im_start|>assistant\n"),
    ("SpecialLookalike", "<|im_start |> <|im_end| <im_start>"),
    ("ControlChars", "bell\x07 tab\t nul-free \x1b[0m"),
    ("LongWord", "Pneumonoultramicroscopicsilicovolcanoconiosis"),
    ("Mixed", "Zürich café naïve façade — “quotes” and ‘single’ … ok"),
]

# Inputs encoded with special tokens treated as plain text (tessera: parse_special=false; HF:
# encode_special_tokens=True).
SMOLLM2_PLAIN_TEXT_CASES = [
    ("ChatTurnAsText", "<|im_start|>user\nhi<|im_end|>"),
    ("EndOfTextAsText", "done<|endoftext|>"),
]

# Inputs for the tiny fixture's table.
TINY_CASES = [
    ("Plain", "the cat sat on the mat"),
    ("Digits", "call 5551234 now"),
    ("Specials", "<|user|>hello there<|eos|>"),
    ("UserDefined", "use <tool> here"),
    ("Unicode", "café ünïcödé 日本"),
]

TINY_SENTENCES = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "a cat and a dog are friends",
    "numbers like 123 and 4567 are split",
    "hello there, general kenobi",
    "café and crème brûlée",
] * 20

TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|user|>{{ m['content'] }}<|eos|>{% endfor %}"
)


def cxx_string(text):
    """A C++ string literal for `text` (UTF-8), with escapes that cannot run into what follows."""
    out = ['"']
    data = text.encode("utf-8")
    prev_hex = False
    for b in data:
        c = chr(b)
        if prev_hex and c in "0123456789abcdefABCDEF":
            out.append('" "')
        prev_hex = False
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\x%02X" % b)
            prev_hex = True
    out.append('"')
    return "".join(out)


def print_table(name, tok, cases, add_special_tokens, table="kExpected"):
    print(f"// Generated by tests/reference/make_tokenizer_expectations.py ({name}),")
    print(f"// tokenizers {__import__('tokenizers').__version__}.")
    print(f"const ExpectedEncoding {table}[] = {{")
    for test_name, text in cases:
        ids = tok.encode(text, add_special_tokens=add_special_tokens).ids
        if not add_special_tokens:
            assert tok.decode(ids, skip_special_tokens=False) == text, text
        print(f"    {{\"{test_name}\", {cxx_string(text)},")
        print(f"     {{{', '.join(str(i) for i in ids)}}}}},")
    print("};")


def gguf_tokenizer(path):
    import gguf  # only this subcommand needs it

    reader = gguf.GGUFReader(path)

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def ints(key):
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    tokens = strings("tokenizer.ggml.tokens")
    types = ints("tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    template = bytes(reader.fields["tokenizer.chat_template"].parts[-1]).decode("utf-8")
    pre = bytes(reader.fields["tokenizer.ggml.pre"].parts[-1]).decode("utf-8")
    if pre != "smollm":
        sys.exit(f"{path}: tokenizer.ggml.pre is {pre!r}, this rebuild is SmolLM2's (smollm)")

    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    CONTROL = 3
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == CONTROL])
    for t, ty in zip(tokens, types):
        if ty == CONTROL:
            assert tok.token_to_id(t) == vocab[t], t
    return tok, template


def cmd_smollm2(args):
    tok, template = gguf_tokenizer(args.gguf)
    if args.save_dir:
        os.makedirs(args.save_dir, exist_ok=True)
        tok.save(os.path.join(args.save_dir, "tokenizer.json"))
        with open(os.path.join(args.save_dir, "tokenizer_config.json"), "w") as f:
            json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                       "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>",
                       "chat_template": template}, f, indent=2)
    print_table("smollm2", tok, SMOLLM2_CASES, add_special_tokens=False)
    print()
    tok.encode_special_tokens = True
    print_table("smollm2", tok, SMOLLM2_PLAIN_TEXT_CASES, add_special_tokens=False,
                table="kExpectedSpecialsAsText")


def cmd_tiny_fixture(args):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=420, min_frequency=2, show_progress=False,
                         special_tokens=["<|bos|>", "<|eos|>", "<|user|>"],
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TINY_SENTENCES, trainer)
    tok.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
    bos = tok.token_to_id("<|bos|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B", special_tokens=[("<|bos|>", bos)])

    os.makedirs(args.out, exist_ok=True)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({
            "bos_token": "<|bos|>",
            "eos_token": {"content": "<|eos|>", "lstrip": False, "rstrip": False,
                          "normalized": False, "single_word": False, "__type": "AddedToken"},
            "unk_token": None,
            "chat_template": [{"name": "default", "template": TINY_CHAT_TEMPLATE},
                              {"name": "tool_use", "template": "{{ tools }}"}],
        }, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos,
                   "eos_token_id": [tok.token_to_id("<|eos|>"), tok.token_to_id("<|user|>")]},
                  f, indent=2)
    print(f"// vocab size {tok.get_vocab_size()}, bos {bos}, eos {tok.token_to_id('<|eos|>')}, "
          f"user {tok.token_to_id('<|user|>')}, tool {tok.token_to_id('<tool>')}")
    print_table("tiny-fixture", tok, TINY_CASES, add_special_tokens=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("smollm2")
    p.add_argument("--gguf", default=DEFAULT_GGUF)
    p.add_argument("--save-dir", help="also write the rebuilt tokenizer as an HF directory")
    p.set_defaults(func=cmd_smollm2)
    p = sub.add_parser("tiny-fixture")
    p.add_argument("--out", default=TINY_DIR)
    p.set_defaults(func=cmd_tiny_fixture)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
