// A hand-made byte-level vocab for tests that need exact control over tokens and merges.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera::test_support {

// Ids 0..255 are the single bytes (id == byte value); `extra` tokens follow from id 256 in order.
// Merges are given in byte-level spelling ("Ġ t"), highest priority first.
struct ExtraToken {
  std::string text;
  TokenType type = TokenType::kNormal;
};

inline Vocab small_vocab(const std::vector<ExtraToken>& extra,
                         const std::vector<std::string>& merges, std::string pre = "gpt2") {
  Vocab v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
    v.types.push_back(TokenType::kNormal);
  }
  for (const ExtraToken& t : extra) {
    v.tokens.push_back(t.text);
    v.types.push_back(t.type);
  }
  v.merges = merges;
  return v;
}

// The id of byte `c` in small_vocab().
inline int32_t byte_id(char c) {
  return static_cast<uint8_t>(c);
}

}  // namespace tessera::test_support
