#include <string_view>

#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace tessera {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  // An id the tokenizer does not know contributes nothing: push() has no error channel, and the
  // engine only feeds ids sampled from the model's own vocab.
  absl::StatusOr<std::string> bytes =
      tokenizer_.decode(std::span<const int32_t>(&id, 1), skip_special_);
  if (!bytes.ok() || bytes->empty()) return "";
  pending_ += *bytes;
  // Hold back only a tail that can still become a character; anything else that is not valid
  // (a sequence cut short by a byte that cannot continue it) will never be completed, so it is
  // emitted now as U+FFFD rather than stalling the stream.
  const size_t hold = incomplete_utf8_suffix(pending_);
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tessera
