// Regex pre-tokenization: cuts text into the pieces that BPE then encodes one at a time.
//
// Patterns are applied in order. Each one splits every piece the previous ones produced; both the
// matches and the text between them become pieces (HF's Split with behavior "Isolated", and
// llama.cpp's unicode_regex_split), so concatenating the pieces always gives back the input. A
// pattern sees one piece as its whole subject: lookarounds do not see past the piece's ends.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

// The GPT-2 pattern, as HF's ByteLevel pre-tokenizer writes it (use_regex: true).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A pre-tokenizer known by its GGUF name (tokenizer.ggml.pre).
struct NamedPreTokenizer {
  std::vector<std::string> patterns;
  // The vocab's BPE ran with HF's `ignore_merges`: a piece that is itself a token is emitted as
  // that token without merging (llama.cpp sets this for the Llama-3 family and Tekken).
  bool ignore_merges = false;
};

// The patterns for a GGUF pre-tokenizer name, after llama.cpp's llama-vocab table but with the
// regexes as the models' tokenizer.json files write them (PCRE2 has what llama.cpp's std::regex
// lacked, e.g. (?i:...) and possessive quantifiers). An unknown name is NotFound listing the
// known ones.
absl::StatusOr<NamedPreTokenizer> named_pre_tokenizer(std::string_view name);

// Every name named_pre_tokenizer() accepts, sorted.
std::vector<std::string> known_pre_tokenizer_names();

class PreTokenizer {
 public:
  // Compiles the patterns (PCRE2 with UTF and UCP, so \p{L}, \s and case folding are Unicode
  // aware; JIT-compiled where the library supports it). A pattern that does not compile is
  // InvalidArgument naming its index, the PCRE2 message and the offset.
  static absl::StatusOr<PreTokenizer> create(std::vector<std::string> patterns);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the non-empty pieces of `text` to `pieces`, as views into `text`, in order. `text`
  // must be valid UTF-8 (InvalidArgument with the offset otherwise). Safe to call from several
  // threads at once. Fails only if PCRE2 does (e.g. a pattern that exhausts its match limit).
  absl::Status split(std::string_view text, std::vector<std::string_view>* pieces) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  PreTokenizer(std::vector<std::string> patterns, std::vector<std::unique_ptr<Compiled>> compiled);

  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;  // one per pattern
};

}  // namespace tessera
