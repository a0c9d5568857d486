// Small text helpers for the tuning files and environment: split on one character, trim, and
// integer / floating-point parsing that never throws.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tessera::tuning_text {

// Splits on every `sep`; "a,,b" gives {"a", "", "b"}, "" gives {""}.
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

// Without leading and trailing spaces, tabs and carriage returns.
inline std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// The whole of `s` as a base-10 integer ("+" and spaces not accepted), or nothing.
inline std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end) return std::nullopt;
  return v;
}

// The whole of `s` as a decimal or scientific number, or nothing.
inline std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end) return std::nullopt;
  return v;
}

}  // namespace tessera::tuning_text
