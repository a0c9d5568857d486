#include "server/echoed_text.h"

namespace tessera::server {

namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

std::string echoed_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // text[cut] is the first byte left out: step back while it continues a character (at most 3
  // bytes: a UTF-8 character is 4 bytes at most).
  for (int back = 0; back < 3 && cut > 0 && is_continuation_byte(text[cut]); ++back) --cut;
  if (is_continuation_byte(text[cut])) cut = max_bytes;  // not UTF-8 here: cut where asked
  std::string out(text.substr(0, cut));
  out += "...";
  return out;
}

}  // namespace tessera::server
