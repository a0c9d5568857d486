// Byte-level BPE tokenizer (GPT-2 / Llama-3 / SmolLM2 style) with a PCRE2 pre-tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera {

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0;
  size_t end = 0;
};

class Tokenizer {
 public:
  // Builds the tokenizer; an unsupported model or pre-tokenizer, or an inconsistent vocab
  // (merge of unknown tokens, special ids out of range), is an error naming it.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> create(Vocab vocab);
  ~Tokenizer();

  // Text to ids. Special/added tokens written in the text are matched first when
  // `parse_special`; BOS is prepended when `add_special` and the vocab asks for it.
  // Invalid UTF-8 is an error giving the byte offset. Control tokens are not matched where they
  // would overlap one of `plain` (ascending, disjoint ranges of `text`: what a user wrote, such
  // as a chat message's content), whose bytes go through BPE like any text.
  absl::StatusOr<std::vector<int32_t>> encode(std::string_view text, bool add_special = true,
                                              bool parse_special = true,
                                              std::span<const TextSpan> plain = {}) const;
  // The first control token (BOS, EOS, chat turn markers...) written in `text`, or "" when none.
  std::string_view find_control_token(std::string_view text) const;

  // Ids to raw bytes (may end in an incomplete UTF-8 sequence). Control tokens are skipped when
  // `skip_special`. Out-of-range ids are an error.
  absl::StatusOr<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes one token stands for ("" for an id out of range).
  std::string token_bytes(int32_t id) const;
  // The token's string as stored in the vocab (byte-level encoded), for display.
  const std::string& token_text(int32_t id) const;
  // The id of a token written exactly as in the vocab, or -1.
  int32_t token_id(std::string_view text) const;

  int32_t vocab_size() const;
  const Vocab& vocab() const;
  bool is_control(int32_t id) const;
  bool is_stop(int32_t id) const;  // eos or another end-of-turn id

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into text pieces that are always complete UTF-8: bytes of a character
// split across tokens are held back until the character is whole.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true);
  // The text that became complete with this token (maybe empty).
  std::string push(int32_t id);
  // Whatever is still held back, invalid bytes replaced by U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes of an incomplete UTF-8 character
};

}  // namespace tessera
