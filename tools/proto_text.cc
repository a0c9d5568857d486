#include "tools/proto_text.h"

#include "absl/strings/str_format.h"

namespace tessera::cli {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (2..4 bytes), or 0.
size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  if (b >= 0xC2 && b <= 0xDF)
    n = 2;
  else if (b >= 0xE0 && b <= 0xEF)
    n = 3;
  else if (b >= 0xF0 && b <= 0xF4)
    n = 4;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

const char* finish_reason_name(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

std::string quote_token(const std::string& bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b == '\n')
      out += "\\n";
    else if (b == '\t')
      out += "\\t";
    else if (b == '\r')
      out += "\\r";
    else if (b == '"')
      out += "\\\"";
    else if (b == '\\')
      out += "\\\\";
    else if (b >= 0x20 && b < 0x7F)
      out += static_cast<char>(b);
    else if (size_t n = utf8_sequence_length(bytes, i); n > 0) {
      out.append(bytes, i, n);
      i += n;
      continue;
    } else {
      out += absl::StrFormat("\\x%02x", b);
    }
    ++i;
  }
  return out + "\"";
}

size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

}  // namespace tessera::cli
