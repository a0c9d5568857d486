#include "runtime/placement/memory_size.h"

#include <array>
#include <cctype>
#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

struct Unit {
  std::string_view name;  // lower case
  uint64_t bytes;
};

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr std::array<Unit, 9> kUnits = {{
    {"b", 1},
    {"kb", 1000},
    {"mb", 1000 * 1000},
    {"gb", 1000 * 1000 * 1000},
    {"tb", uint64_t{1000} * 1000 * 1000 * 1000},
    {"kib", kKiB},
    {"mib", kKiB* kKiB},
    {"gib", kKiB* kKiB* kKiB},
    {"tib", kKiB* kKiB* kKiB* kKiB},
}};
constexpr std::string_view kAllowed =
    "bytes or a number with B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
// Fraction digits beyond this cannot change the result by a whole byte at TiB scale.
constexpr size_t kMaxFractionDigits = 18;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

absl::Status invalid(std::string_view key, std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      str_cat(key, ": \"", text, "\" ", why, "; use ", kAllowed, " (e.g. 40GiB)"));
}

}  // namespace

absl::StatusOr<uint64_t> parse_memory_size(std::string_view text, std::string_view key) {
  const std::string_view s = trim(text);
  if (s.empty()) return invalid(key, text, "is empty");
  if (s.front() == '-') return invalid(key, text, "is negative");

  size_t pos = 0;
  if (s[pos] == '+') ++pos;
  const size_t int_begin = pos;
  while (pos < s.size() && is_digit(s[pos])) ++pos;
  const std::string_view int_digits = s.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    const size_t frac_begin = pos;
    while (pos < s.size() && is_digit(s[pos])) ++pos;
    frac_digits = s.substr(frac_begin, pos - frac_begin);
  }
  if (int_digits.empty() && frac_digits.empty()) return invalid(key, text, "is not a number");

  const std::string_view unit_text = trim(s.substr(pos));
  std::string unit_lower;
  for (char c : unit_text)
    unit_lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t multiplier = 0;
  if (unit_lower.empty()) {
    multiplier = 1;
  } else {
    for (const Unit& u : kUnits) {
      if (u.name == unit_lower) multiplier = u.bytes;
    }
    if (multiplier == 0) {
      return invalid(key, text, str_cat("has unknown unit \"", unit_text, "\""));
    }
  }
  const bool has_fraction = frac_digits.find_first_not_of('0') != std::string_view::npos;
  if (multiplier == 1 && has_fraction) {
    return invalid(key, text, "is a fractional number of bytes");
  }

  using u128 = unsigned __int128;
  constexpr u128 kMax = std::numeric_limits<uint64_t>::max();
  u128 whole = 0;
  for (char c : int_digits) {
    whole = whole * 10 + static_cast<u128>(c - '0');
    if (whole > kMax) return invalid(key, text, "is too large (more than 2^64 - 1 bytes)");
  }
  u128 total = whole * multiplier;
  if (total > kMax) return invalid(key, text, "is too large (more than 2^64 - 1 bytes)");
  if (has_fraction) {
    // numerator / 10^digits of a unit, truncated to whole bytes; stays below 2^128 because
    // numerator < 10^18 and multiplier <= 2^40.
    u128 numerator = 0;
    u128 denominator = 1;
    for (size_t i = 0; i < frac_digits.size() && i < kMaxFractionDigits; ++i) {
      numerator = numerator * 10 + static_cast<u128>(frac_digits[i] - '0');
      denominator *= 10;
    }
    total += numerator * multiplier / denominator;
    if (total > kMax) return invalid(key, text, "is too large (more than 2^64 - 1 bytes)");
  }
  return static_cast<uint64_t>(total);
}

std::string format_memory_size(uint64_t bytes) {
  if (bytes < kKiB) return fmt::format("{} B", bytes);
  constexpr std::array<std::string_view, 5> kNames = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / static_cast<double>(kKiB);
  size_t unit = 0;
  // Move up while the value would print as 1024.0 or more in the current unit.
  while (unit + 1 < kNames.size() && value >= 1023.95) {
    value /= static_cast<double>(kKiB);
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kNames[unit]);
}

}  // namespace tessera
