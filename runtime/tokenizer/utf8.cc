#include "runtime/tokenizer/utf8.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace tessera {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool is_continuation(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

Utf8Scan scan_utf8(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  const size_t avail = s.size() - pos;
  const uint8_t lead = p[0];
  if (lead < 0x80) return {Utf8Unit::kComplete, 1};

  // Expected length and the allowed range of the second byte (Unicode table 3-7). Restricting
  // the second byte is what rules out overlongs (E0 80..9F, F0 80..8F), surrogates (ED A0..BF)
  // and code points above U+10FFFF (F4 90..BF).
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead == 0xE0) {
    need = 3, lo = 0xA0;
  } else if (lead == 0xED) {
    need = 3, hi = 0x9F;
  } else if (lead >= 0xE1 && lead <= 0xEF) {
    need = 3;
  } else if (lead == 0xF0) {
    need = 4, lo = 0x90;
  } else if (lead == 0xF4) {
    need = 4, hi = 0x8F;
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    need = 4;
  } else {
    return {Utf8Unit::kInvalid, 1};  // 80..C1, F5..FF never start a character
  }

  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) return {Utf8Unit::kTruncated, i};
    const uint8_t b = p[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) return {Utf8Unit::kInvalid, i};
  }
  return {Utf8Unit::kComplete, need};
}

size_t find_invalid_utf8(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    // ASCII fast path: most prompt text is ASCII.
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Scan scan = scan_utf8(s, pos);
    if (scan.unit != Utf8Unit::kComplete) return pos;
    pos += scan.length;
  }
  return std::string_view::npos;
}

absl::Status validate_utf8(std::string_view s) {
  const size_t bad = find_invalid_utf8(s);
  if (bad == std::string_view::npos) return absl::OkStatus();
  const Utf8Scan scan = scan_utf8(s, bad);
  return absl::InvalidArgumentError(absl::StrFormat(
      "invalid UTF-8 at byte offset %d (byte 0x%02X%s)", bad, static_cast<uint8_t>(s[bad]),
      scan.unit == Utf8Unit::kTruncated ? ", sequence cut off by the end of the text" : ""));
}

size_t incomplete_utf8_suffix(std::string_view s) {
  // Only the last 3 bytes can hold an incomplete sequence (a 4-byte character minus one).
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t pos = s.size(); pos > start;) {
    --pos;
    const auto b = static_cast<uint8_t>(s[pos]);
    if (is_continuation(b)) continue;
    const Utf8Scan scan = scan_utf8(s, pos);
    return scan.unit == Utf8Unit::kTruncated ? s.size() - pos : 0;
  }
  return 0;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const Utf8Scan scan = scan_utf8(s, pos);
    if (scan.unit == Utf8Unit::kComplete) {
      out.append(s.substr(pos, scan.length));
    } else {
      out.append(kReplacement);  // a truncated tail is one maximal subpart as well
    }
    pos += scan.length;
  }
  return out;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t decode_utf8(std::string_view s, size_t pos, char32_t* cp) {
  const Utf8Scan scan = scan_utf8(s, pos);
  if (scan.unit != Utf8Unit::kComplete) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + pos;
  switch (scan.length) {
    case 1:
      *cp = p[0];
      break;
    case 2:
      *cp = (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
      break;
    case 3:
      *cp = (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
      break;
    default:
      *cp = (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
            (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu);
      break;
  }
  return scan.length;
}

}  // namespace tessera
