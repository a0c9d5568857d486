#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace tessera {
namespace {

// Tokens written in the text that stand for themselves instead of going through BPE.
struct SpecialToken {
  std::string_view text;
  int32_t id;
  bool needs_parse_special;  // control/unknown tokens only match when the caller parses specials
};

bool is_control_like(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

// "<0xNN>" -> NN (SentencePiece-style byte tokens).
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

// The bytes a token stands for when decoded.
std::string token_to_bytes(std::string_view text, TokenType type) {
  switch (type) {
    case TokenType::kControl:
    case TokenType::kUserDefined:
    case TokenType::kUnknown:
      // Added tokens are stored as plain text, not in byte-level spelling.
      return std::string(text);
    case TokenType::kByte:
      if (std::optional<uint8_t> b = parse_byte_token(text)) return std::string(1, char(*b));
      break;
    default:
      break;
  }
  // HF's ByteLevel decoder: a token that is not entirely byte-level spelling (possible for
  // hand-added vocab entries) is taken as its plain UTF-8 text.
  if (std::optional<std::string> bytes = byte_level_decode(text)) return *std::move(bytes);
  return std::string(text);
}

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  std::unordered_map<std::string_view, int32_t> ids;  // keys view into vocab.tokens
  std::array<int32_t, 256> byte_ids{};                // initial BPE symbol of each byte value
  Bpe bpe;
  PreTokenizer pre;
  bool ignore_merges = false;

  // Decoded bytes of every token, concatenated; token i is [offsets[i], offsets[i + 1]).
  std::string bytes;
  std::vector<uint32_t> offsets;

  // Special tokens bucketed by first byte, longest first, so that matching at a position is a
  // table probe plus a few compares, and the first hit is the longest match.
  std::array<std::vector<SpecialToken>, 256> specials;
  std::vector<uint8_t> stop;  // per id

  explicit Impl(PreTokenizer p) : pre(std::move(p)) {}

  // The special token written at text[pos] (the longest), or nullptr; a control token counts
  // only when it ends at or before `control_end` (0: control tokens are off).
  const SpecialToken* special_at(std::string_view text, size_t pos, size_t control_end) const {
    for (const SpecialToken& special : specials[static_cast<uint8_t>(text[pos])]) {
      if (special.needs_parse_special && pos + special.text.size() > control_end) continue;
      if (text.compare(pos, special.text.size(), special.text) == 0) return &special;
    }
    return nullptr;
  }

  std::string_view decoded(int32_t id) const {
    return std::string_view(bytes).substr(offsets[id], offsets[id + 1] - offsets[id]);
  }

  // Buffers reused across the segments of one encode() call (never shared between calls, so
  // that concurrent encodes need no locking).
  struct EncodeScratch {
    std::vector<std::string_view> pieces;
    std::vector<int32_t> symbols;
    Bpe::Scratch bpe;
  };

  absl::Status encode_text(std::string_view text, EncodeScratch* scratch,
                           std::vector<int32_t>* out) const;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocab vocab) {
  if (vocab.model != "gpt2") {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tokenizer model \"%s\" is not supported (only byte-level BPE, \"gpt2\")", vocab.model));
  }
  const auto n = static_cast<int64_t>(vocab.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("vocab has no tokens");
  if (n > INT32_MAX - 1) return absl::InvalidArgumentError("vocab has too many tokens");
  if (vocab.types.size() != vocab.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocab has %d tokens but %d token types", n, vocab.types.size()));
  }
  const std::pair<const char*, int32_t> special_ids[] = {
      {"bos", vocab.bos_id}, {"eos", vocab.eos_id}, {"pad", vocab.pad_id}, {"unk", vocab.unk_id}};
  for (const auto& [name, id] : special_ids) {
    if (id < -1 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s token id %d is out of range [0, %d)", name, id, n));
    }
  }
  for (int32_t id : vocab.stop_ids) {
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("stop token id %d is out of range [0, %d)", id, n));
    }
  }
  if (vocab.add_bos && vocab.bos_id < 0) {
    return absl::InvalidArgumentError("vocab asks to add BOS but has no BOS token");
  }
  if (vocab.add_eos && vocab.eos_id < 0) {
    return absl::InvalidArgumentError("vocab asks to add EOS but has no EOS token");
  }

  // Pre-tokenizer: explicit patterns (from tokenizer.json) win over the GGUF name.
  std::vector<std::string> patterns = vocab.pre_regexes;
  bool ignore_merges = vocab.ignore_merges;
  if (patterns.empty()) {
    absl::StatusOr<NamedPreTokenizer> named = named_pre_tokenizer(vocab.pre);
    // An unknown name makes this vocab unusable: the caller passed a bad argument.
    if (!named.ok()) return absl::InvalidArgumentError(named.status().message());
    patterns = std::move(named->patterns);
    ignore_merges = ignore_merges || named->ignore_merges;
  }
  TESSERA_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::create(std::move(patterns)));

  auto impl = std::make_unique<Impl>(std::move(pre));
  impl->vocab = std::move(vocab);
  impl->ignore_merges = ignore_merges;
  const Vocab& v = impl->vocab;

  impl->ids.reserve(v.tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    if (!v.tokens[id].empty()) impl->ids.emplace(v.tokens[id], id);  // first spelling wins
  }

  std::vector<std::string> missing_bytes;
  for (int b = 0; b < 256; ++b) {
    auto it = impl->ids.find(byte_level_encode(std::string(1, static_cast<char>(b))));
    impl->byte_ids[b] = it != impl->ids.end() ? it->second : v.unk_id;
    if (impl->byte_ids[b] < 0) missing_bytes.push_back(absl::StrFormat("0x%02X", b));
  }
  if (!missing_bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vocab has no token for byte(s) %s and no unknown token to stand in for them",
        absl::StrJoin(missing_bytes, ", ")));
  }

  std::vector<Bpe::Merge> merges;
  merges.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& merge = v.merges[i];
    const size_t space = merge.find(' ');
    if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("merge %d (\"%s\") is not two tokens separated by one space", i, merge));
    }
    const std::string_view left = std::string_view(merge).substr(0, space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    const std::string joined = std::string(left) + std::string(right);
    for (std::string_view part : {left, right, std::string_view(joined)}) {
      if (!impl->ids.contains(part)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("merge %d (\"%s\"): \"%s\" is not in the vocab", i, merge, part));
      }
    }
    merges.push_back({impl->ids.find(left)->second, impl->ids.find(right)->second,
                      impl->ids.find(joined)->second});
  }
  impl->bpe = Bpe(merges);

  impl->offsets.reserve(v.tokens.size() + 1);
  impl->offsets.push_back(0);
  for (int32_t id = 0; id < n; ++id) {
    impl->bytes += token_to_bytes(v.tokens[id], v.types[id]);
    if (impl->bytes.size() > UINT32_MAX) return absl::InvalidArgumentError("vocab too large");
    impl->offsets.push_back(static_cast<uint32_t>(impl->bytes.size()));
  }

  for (int32_t id = 0; id < n; ++id) {
    const TokenType type = v.types[id];
    const std::string& text = v.tokens[id];
    if (text.empty() || !(is_control_like(type) || type == TokenType::kUserDefined)) continue;
    if (!validate_utf8(text).ok()) {
      return absl::InvalidArgumentError(absl::StrFormat("special token %d is not valid UTF-8", id));
    }
    impl->specials[static_cast<uint8_t>(text[0])].push_back({text, id, is_control_like(type)});
  }
  for (auto& bucket : impl->specials) {
    std::stable_sort(
        bucket.begin(), bucket.end(),
        [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  }

  impl->stop.assign(v.tokens.size(), 0);
  if (v.eos_id >= 0) impl->stop[v.eos_id] = 1;
  for (int32_t id : v.stop_ids) impl->stop[id] = 1;

  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

absl::Status Tokenizer::Impl::encode_text(std::string_view text, EncodeScratch* scratch,
                                          std::vector<int32_t>* out) const {
  if (text.empty()) return absl::OkStatus();
  std::vector<std::string_view>& pieces = scratch->pieces;
  std::vector<int32_t>& symbols = scratch->symbols;
  pieces.clear();
  TESSERA_RETURN_IF_ERROR(pre.split(text, &pieces));
  for (std::string_view piece : pieces) {
    if (ignore_merges) {
      auto it = ids.find(byte_level_encode(piece));
      if (it != ids.end()) {
        out->push_back(it->second);
        continue;
      }
    }
    symbols.clear();
    for (char c : piece) symbols.push_back(byte_ids[static_cast<uint8_t>(c)]);
    bpe.encode(symbols, &scratch->bpe, out);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special,
                                                       bool parse_special,
                                                       std::span<const TextSpan> plain) const {
  TESSERA_RETURN_IF_ERROR(validate_utf8(text));
  const Impl& im = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && im.vocab.add_bos) out.push_back(im.vocab.bos_id);

  // Leftmost-longest matching of special tokens (HF's added-vocabulary split); the text between
  // them goes through the pre-tokenizer and BPE.
  Impl::EncodeScratch scratch;
  size_t segment = 0;
  size_t pos = 0;
  size_t next_plain = 0;  // the first of `plain` that does not end at or before pos
  while (pos < text.size()) {
    while (next_plain < plain.size() && plain[next_plain].end <= pos) ++next_plain;
    // A control token may not take bytes of a plain range.
    const size_t control_end = !parse_special               ? 0
                               : next_plain < plain.size() ? plain[next_plain].begin
                                                           : std::string_view::npos;
    const SpecialToken* hit = im.special_at(text, pos, control_end);
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    TESSERA_RETURN_IF_ERROR(im.encode_text(text.substr(segment, pos - segment), &scratch, &out));
    out.push_back(hit->id);
    pos += hit->text.size();
    segment = pos;
  }
  TESSERA_RETURN_IF_ERROR(im.encode_text(text.substr(segment), &scratch, &out));

  if (add_special && im.vocab.add_eos) out.push_back(im.vocab.eos_id);
  return out;
}

std::string_view Tokenizer::find_control_token(std::string_view text) const {
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const SpecialToken* hit = impl_->special_at(text, pos, std::string_view::npos);
    if (hit != nullptr && hit->needs_parse_special) return hit->text;
  }
  return {};
}

absl::StatusOr<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                              bool skip_special) const {
  const Impl& im = *impl_;
  const int32_t n = vocab_size();
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("token id %d at position %d is out of range [0, %d)", id, i, n));
    }
    if (skip_special && is_control_like(im.vocab.types[id])) continue;
    out.append(im.decoded(id));
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return std::string(impl_->decoded(id));
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= vocab_size()) return kEmpty;
  return impl_->vocab.tokens[id];
}

int32_t Tokenizer::token_id(std::string_view text) const {
  auto it = impl_->ids.find(text);
  return it == impl_->ids.end() ? -1 : it->second;
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->vocab.tokens.size());
}

const Vocab& Tokenizer::vocab() const {
  return impl_->vocab;
}

bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->vocab.types[id] == TokenType::kControl;
}

bool Tokenizer::is_stop(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->stop[id] != 0;
}

}  // namespace tessera
