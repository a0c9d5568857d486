#include "runtime/tuning/token_buckets.h"

#include <algorithm>
#include <optional>

#include "base/str_cat.h"
#include "base/text_fields.h"

namespace tessera {
namespace {

absl::Status validate_decode(const std::vector<int64_t>& decode) {
  if (decode.empty()) return absl::InvalidArgumentError("decode buckets: the list is empty");
  for (size_t i = 0; i < decode.size(); ++i) {
    if (decode[i] < 1) {
      return absl::InvalidArgumentError(
          str_cat("decode buckets: bucket ", i, " is ", decode[i], " (must be positive)"));
    }
    if (i > 0 && decode[i] <= decode[i - 1]) {
      return absl::InvalidArgumentError(str_cat("decode buckets: bucket ", i, " (", decode[i],
                                                ") is not greater than bucket ", i - 1, " (",
                                                decode[i - 1], "); buckets must ascend"));
    }
  }
  return absl::OkStatus();
}

int64_t round_up(int64_t n, int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

}  // namespace

absl::Status TokenBuckets::validate() const {
  if (absl::Status s = validate_decode(decode); !s.ok()) return s;
  if (prefill_pad < 1) {
    return absl::InvalidArgumentError(
        str_cat("prefill pad is ", prefill_pad, " (must be positive)"));
  }
  return absl::OkStatus();
}

int64_t decode_bucket(const TokenBuckets& b, int64_t n) {
  if (n <= 0) return 0;
  const auto it = std::lower_bound(b.decode.begin(), b.decode.end(), n);
  if (it != b.decode.end()) return *it;
  return prefill_padded(b, n);
}

int64_t prefill_padded(const TokenBuckets& b, int64_t n) {
  if (n <= 0) return 0;
  return round_up(n, std::max<int64_t>(b.prefill_pad, 1));
}

int64_t padded_step_tokens(const TokenBuckets& b, int64_t n, bool has_prefill) {
  return has_prefill ? prefill_padded(b, n) : decode_bucket(b, n);
}

absl::StatusOr<std::vector<int64_t>> parse_bucket_list(std::string_view text) {
  std::vector<int64_t> out;
  const std::vector<std::string_view> parts = tuning_text::split(text, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view p = tuning_text::trim(parts[i]);
    const std::optional<int64_t> v = tuning_text::parse_int(p);
    if (!v) {
      return absl::InvalidArgumentError(
          str_cat("bucket list '", text, "': element ", i, " ('", p, "') is not an integer"));
    }
    out.push_back(*v);
  }
  if (absl::Status s = validate_decode(out); !s.ok()) {
    return absl::InvalidArgumentError(str_cat("bucket list '", text, "': ", s.message()));
  }
  return out;
}

std::string format_bucket_list(const std::vector<int64_t>& buckets) {
  std::string out;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(buckets[i]);
  }
  return out;
}

}  // namespace tessera
