#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/utf8.h"

namespace tessera {
namespace {

// bytes_to_unicode() from GPT-2's encoder.py: the printable ranges '!'..'~', '¡'..'¬' and
// '®'..'ÿ' keep their value; the other 68 bytes take U+0100, U+0101, ... in byte order.
struct ByteMap {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // index: code point (all images are < 0x144), -1 = none

  ByteMap() {
    from_cp.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      to_cp[b] = cp;
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_code_point(uint8_t b) {
  return byte_map().to_cp[b];
}

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  const ByteMap& map = byte_map();
  if (cp >= map.from_cp.size() || map.from_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(map.from_cp[cp]);
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_code_point(static_cast<uint8_t>(c)), &out);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const size_t len = decode_utf8(text, pos, &cp);
    if (len == 0) return std::nullopt;
    const std::optional<uint8_t> b = code_point_to_byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    pos += len;
  }
  return out;
}

}  // namespace tessera
