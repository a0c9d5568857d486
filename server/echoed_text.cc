#include "server/echoed_text.h"

#include "runtime/tokenizer/utf8.h"

namespace tessera::server {

std::string echoed_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // The first max_bytes, less a character the cut would split (not UTF-8 there: cut where asked).
  const std::string_view head = text.substr(0, max_bytes);
  std::string out(head.substr(0, head.size() - incomplete_utf8_suffix(head)));
  out += "...";
  return out;
}

}  // namespace tessera::server
