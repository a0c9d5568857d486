// What a tokenizer is made from: tokens, merges, special ids and the chat template, whichever
// file they came from (GGUF metadata or tokenizer.json + tokenizer_config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

// GGUF's token types (tokenizer.ggml.token_type); tokenizer.json added tokens map to kControl
// (special: true) or kUserDefined (special: false).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  std::string model = "gpt2";  // only byte-level BPE ("gpt2") is supported
  // Pre-tokenizer: a known name (GGUF tokenizer.ggml.pre: "smollm", "llama-bpe", "gpt2",
  // "default", ...) or, when `pre_regexes` is non-empty, those patterns applied in order
  // (each one splits the pieces the previous produced, as llama.cpp and HF Sequence do).
  std::string pre = "default";
  std::vector<std::string> pre_regexes;
  std::vector<std::string> tokens;  // byte-level encoded strings (GPT-2 byte-to-unicode map)
  std::vector<TokenType> types;     // same length as tokens
  std::vector<std::string> merges;  // "left right", highest priority first
  // HF BPE's ignore_merges: a pre-token that is itself in the vocab is one token, unmerged
  // (Llama-3). Named presets that need it set it on their own.
  bool ignore_merges = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t pad_id = -1;
  int32_t unk_id = -1;
  std::vector<int32_t> stop_ids;  // eos plus end-of-turn tokens (<|eot_id|>, <|im_end|>, ...)
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;  // Jinja source; empty when the model has none
};

// Adds to v.stop_ids the control tokens that end a turn in the chat formats tessera knows
// (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>), keeping the list
// sorted and unique. Both loaders call it, so GGUF and HF directories stop alike.
void add_end_of_turn_stop_ids(Vocab& v);

// From the tokenizer.* keys of an opened GGUF file's metadata (see gguf_file.h).
class GgufFile;
absl::StatusOr<Vocab> vocab_from_gguf(const GgufFile& gguf);

// From an HF directory: tokenizer.json, plus tokenizer_config.json (chat template, bos/eos,
// add_bos) and generation_config.json (eos ids) when present.
absl::StatusOr<Vocab> vocab_from_hf_dir(const std::string& dir);

}  // namespace tessera
