#include "runtime/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/tokenizer/utf8.h"

namespace tessera {
namespace {

// --- the named presets -------------------------------------------------------------------------
// Where llama.cpp rewrote a tokenizer.json regex for std::regex (e.g. (?i:'s|...) spelled out as
// '[sS]|..., possessive quantifiers dropped), the original is used: PCRE2 supports it, and the
// original is what HF tokenizers, the reference for expected ids, runs.

constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kSeedCoderPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kBailingPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM-style: anything but whitespace and sentence punctuation (the parentheses and '|' are
// literally part of the class, as in the original).
constexpr std::string_view kPoroPattern =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
// DeepSeek LLM: letters of the scripts it was trained on, ASCII/full-width punctuation, CJK.
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr std::string_view kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr std::string_view kDeepseekCjk =
    R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr std::string_view kDeepseek3Cjk =
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr std::string_view kDeepseek3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Preset {
  std::vector<std::string_view> names;
  std::vector<std::string_view> patterns;
  bool ignore_merges = false;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      // llama.cpp's fallback for BPE GGUFs without a (known) pre-tokenizer: not GPT-2's regex
      // alone, but with punctuation runs and 3-digit groups cut out, as llama.cpp tokenizes them.
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Pattern, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4",
        "mellum", "gigachat", "a.x-4.0"},
       {kGpt2Pattern}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3Pattern},
       /*ignore_merges=*/true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3Pattern}},
      // SmolLM's tokenizer.json: Sequence[Digits(individual_digits), ByteLevel(use_regex)].
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2Pattern}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "grok-2"}, {kQwen2Pattern}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Pattern, "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"},
       {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {"[\\r\\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"deepseek-v3"}, {R"(\p{N}{1,3})", kDeepseek3Cjk, kDeepseek3Main}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kPoroPattern}},
      {{"viking"}, {kPoroPattern, R"(\p{N})"}},
      {{"tekken"}, {kTekkenPattern}, /*ignore_merges=*/true},
      {{"gpt-4o", "llama4"}, {kGpt4oPattern}},
      {{"seed-coder"}, {kSeedCoderPattern}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingPattern}},
  };
  return table;
}

// --- PCRE2 plumbing ----------------------------------------------------------------------------

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? absl::StrFormat("PCRE2 error %d", code)
               : std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Per-split() matching state. Match data is not shareable between threads, so each call owns
// its own; a larger JIT stack is only set up when a match runs out of the default 32 KiB.
class MatchScratch {
 public:
  MatchScratch() : data_(pcre2_match_data_create(1, nullptr)) {}
  ~MatchScratch() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;

  pcre2_match_data* data() const { return data_; }
  pcre2_match_context* context() const { return context_; }

  // Switches to a JIT stack of up to 64 MiB; false when one is already in use or allocation
  // fails, so that a runaway pattern ends in an error instead of a retry loop.
  bool grow_jit_stack() {
    if (stack_ != nullptr) return false;
    stack_ = pcre2_jit_stack_create(256 * 1024, 64 * 1024 * 1024, nullptr);
    context_ = pcre2_match_context_create(nullptr);
    if (stack_ == nullptr || context_ == nullptr) return false;
    pcre2_jit_stack_assign(context_, nullptr, stack_);
    return true;
  }

 private:
  pcre2_match_data* data_;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

// Unicode White_Space, which is what \s means in Oniguruma (HF tokenizers' regex engine). PCRE2's
// \s adds U+180E MONGOLIAN VOWEL SEPARATOR (a format character since Unicode 6.3), which would
// split " \u180E" where HF keeps it whole.
constexpr std::string_view kWhiteSpaceItems = R"(\p{Z}\t-\r\x{85})";

// `pattern` with \s and \S spelled as White_Space classes. Inside a character class \s becomes
// the class items; \S inside a class has no such spelling and is left to PCRE2.
std::string spell_out_whitespace(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpaceItems) : absl::StrFormat("[%s]", kWhiteSpaceItems);
      } else if (next == 'S' && !in_class) {
        out += absl::StrFormat("[^%s]", kWhiteSpaceItems);
      } else if (next == 'Q') {
        // \Q...\E quotes literally: copy through the \E untouched.
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      } else {
        out.append(pattern.substr(i, 2));  // any other escape, e.g. \\ or \[ or \p
      }
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      ++i;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i < pattern.size() && pattern[i] == '^') out.push_back(pattern[i++]);
      if (i < pattern.size() && pattern[i] == ']') out.push_back(pattern[i++]);
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 2;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
    ++i;
  }
  return out;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

absl::StatusOr<NamedPreTokenizer> named_pre_tokenizer(std::string_view name) {
  for (const Preset& preset : presets()) {
    if (std::find(preset.names.begin(), preset.names.end(), name) == preset.names.end()) continue;
    NamedPreTokenizer out;
    out.ignore_merges = preset.ignore_merges;
    for (std::string_view p : preset.patterns) out.patterns.emplace_back(p);
    return out;
  }
  return absl::NotFoundError(absl::StrFormat("unknown pre-tokenizer \"%s\"; known: %s", name,
                                             absl::StrJoin(known_pre_tokenizer_names(), ", ")));
}

std::vector<std::string> known_pre_tokenizer_names() {
  std::vector<std::string> names;
  for (const Preset& preset : presets()) {
    for (std::string_view n : preset.names) names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

PreTokenizer::PreTokenizer(std::vector<std::string> patterns,
                           std::vector<std::unique_ptr<Compiled>> compiled)
    : patterns_(std::move(patterns)), compiled_(std::move(compiled)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<PreTokenizer> PreTokenizer::create(std::vector<std::string> patterns) {
  uint32_t have_jit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &have_jit);
  std::vector<std::unique_ptr<Compiled>> compiled;
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& pattern = patterns[i];
    if (absl::Status s = validate_utf8(pattern); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("pre-tokenizer pattern %d: %s", i, s.message()));
    }
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    auto c = std::make_unique<Compiled>();
    const std::string source = spell_out_whitespace(pattern);
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                            PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (c->code == nullptr) {
      // Report against the pattern as given; the offset is the one PCRE2 found in the
      // rewritten source when the two differ.
      return absl::InvalidArgumentError(
          absl::StrFormat("pre-tokenizer pattern %d (%s) does not compile: %s at offset %d%s", i,
                          pattern, pcre2_message(error), error_offset,
                          source == pattern ? "" : " of its \\s-expanded form"));
    }
    // JIT is an optimization only: when it is unavailable or fails, the interpreter matches
    // the same way.
    c->jit = have_jit != 0 && pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE) == 0;
    compiled.push_back(std::move(c));
  }
  return PreTokenizer(std::move(patterns), std::move(compiled));
}

namespace {

// Splits `piece` by one compiled pattern into matches and the gaps between them, appending the
// non-empty parts to `out`.
absl::Status split_piece(const pcre2_code* code, bool jit, size_t pattern_index,
                         std::string_view piece, MatchScratch* scratch,
                         std::vector<std::string_view>* out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t emitted = 0;  // end of the last piece appended
  size_t search = 0;   // where the next match attempt starts
  while (search <= piece.size()) {
    // The whole input was validated once up front, so PCRE2 need not recheck (its check covers
    // the whole subject on every call, which would make splitting quadratic).
    int rc = jit ? pcre2_jit_match(code, subject, piece.size(), search, 0, scratch->data(),
                                   scratch->context())
                 : pcre2_match(code, subject, piece.size(), search, PCRE2_NO_UTF_CHECK,
                               scratch->data(), scratch->context());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && scratch->grow_jit_stack()) continue;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("pre-tokenizer pattern %d failed on a piece of %d bytes: %s",
                          pattern_index, piece.size(), pcre2_message(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch->data());
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (begin > emitted) out->push_back(piece.substr(emitted, begin - emitted));
    if (end > begin) out->push_back(piece.substr(begin, end - begin));
    emitted = end;
    if (end > begin) {
      search = end;
    } else {
      // An empty match only marks a cut; step over one character so the search moves on.
      if (end >= piece.size()) break;
      search = end + scan_utf8(piece, end).length;
    }
  }
  if (emitted < piece.size()) out->push_back(piece.substr(emitted));
  return absl::OkStatus();
}

}  // namespace

absl::Status PreTokenizer::split(std::string_view text,
                                 std::vector<std::string_view>* pieces) const {
  if (absl::Status s = validate_utf8(text); !s.ok()) return s;
  if (text.empty()) return absl::OkStatus();
  if (compiled_.empty()) {
    pieces->push_back(text);
    return absl::OkStatus();
  }
  MatchScratch scratch;
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (size_t i = 0; i < compiled_.size(); ++i) {
    next.clear();
    for (std::string_view piece : current) {
      absl::Status s =
          split_piece(compiled_[i]->code, compiled_[i]->jit, i, piece, &scratch, &next);
      if (!s.ok()) return s;
    }
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
  return absl::OkStatus();
}

}  // namespace tessera
