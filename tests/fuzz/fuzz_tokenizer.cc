// libFuzzer target: the default model's byte-level BPE tokenizer (SmolLM2's GGUF vocab: its
// pre-tokenizer regexes, 48k merges, control tokens). The first input byte picks what the rest is:
//  - bit 0 clear: text to encode (bit 1: add_special, bit 2: parse_special, bit 3: the middle
//    third of the text is a `plain` span, as a chat message's content is). Valid UTF-8 must come
//    back byte for byte from decode (without BOS and control tokens, and where every byte has a
//    token); invalid UTF-8 must be refused.
//  - bit 0 set: little-endian 16-bit ids (the top bit of each pair widens it past the vocab, to
//    reach the out-of-range checks) for decode (bit 1: skip_special) and for the incremental
//    detokenizer, whose output must be valid UTF-8.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_default_model.h"

namespace {

using namespace tessera;

std::string hex(std::string_view bytes) {
  std::string out;
  char buf[4];
  for (unsigned char c : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

bool every_byte_has_a_token(const Tokenizer& tok, std::string_view text) {
  static const std::vector<bool> has = [&tok] {
    std::vector<bool> h(256);
    for (int b = 0; b < 256; ++b) {
      h[b] = tok.token_id(byte_level_encode(std::string(1, static_cast<char>(b)))) >= 0;
    }
    return h;
  }();
  for (unsigned char c : text) {
    if (!has[c]) return false;
  }
  return true;
}

void encode(const Tokenizer& tok, uint8_t mode, std::string_view text) {
  const bool add_special = (mode & 2) != 0;
  const bool parse_special = (mode & 4) != 0;
  std::vector<TextSpan> plain;
  if ((mode & 8) != 0) plain.push_back({text.size() / 3, text.size() - text.size() / 3});
  absl::StatusOr<std::vector<int32_t>> ids = tok.encode(text, add_special, parse_special, plain);
  const bool valid = validate_utf8(text).ok();
  if (ids.ok() != valid) std::abort();  // exactly invalid UTF-8 is refused
  if (!ids.ok()) return;
  for (int32_t id : *ids) {
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  }
  // Without control tokens parsed, every byte went through BPE: decoding gives the text back --
  // unless a byte has no token of its own (SmolLM2 lacks some control bytes), which becomes the
  // unknown token as in HF's BPE.
  if (!add_special && !parse_special && every_byte_has_a_token(tok, text)) {
    absl::StatusOr<std::string> back = tok.decode(*ids);
    if (!back.ok() || *back != text) {
      std::fprintf(stderr, "round trip: %zu bytes -> ids", text.size());
      for (int32_t id : *ids) std::fprintf(stderr, " %d", id);
      std::fprintf(stderr, " -> %s\n",
                   back.ok() ? hex(*back).c_str() : back.status().ToString().c_str());
      std::abort();
    }
  }
  (void)tok.find_control_token(text);
}

void decode(const Tokenizer& tok, uint8_t mode, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    ids.push_back((v & 0x8000) != 0
                      ? static_cast<int32_t>(v & 0x7fff) * 7 - 100000
                      : static_cast<int32_t>(v % static_cast<uint32_t>(tok.vocab_size())));
  }
  const bool skip_special = (mode & 2) != 0;
  bool in_range = true;
  for (int32_t id : ids) in_range = in_range && id >= 0 && id < tok.vocab_size();
  absl::StatusOr<std::string> text = tok.decode(ids, skip_special);
  if (text.ok() != in_range) std::abort();  // exactly out-of-range ids are refused
  if (!in_range) return;
  IncrementalDetokenizer detok(tok, skip_special);
  std::string pieces;
  for (int32_t id : ids) pieces += detok.push(id);
  pieces += detok.flush();
  if (!validate_utf8(pieces).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)fuzz::default_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = *fuzz::default_model().tokenizer;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    encode(tok, data[0], rest);
  } else {
    decode(tok, data[0], rest);
  }
  return 0;
}
