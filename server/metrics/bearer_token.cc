#include "server/metrics/bearer_token.h"

#include "absl/strings/match.h"

namespace tessera {

namespace {

// Equal strings, in time that depends on their lengths only.
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool bearer_token_matches(std::string_view authorization, std::string_view token) {
  std::string_view v = authorization;
  constexpr std::string_view kScheme = "bearer";
  if (v.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(absl::string_view(v.data(), kScheme.size()), kScheme.data())) {
    return false;
  }
  v.remove_prefix(kScheme.size());
  if (v.front() != ' ') return false;
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  return constant_time_equal(v, token);
}

}  // namespace tessera
