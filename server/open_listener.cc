#include "server/open_listener.h"

#include "absl/strings/ascii.h"
#include "base/str_cat.h"

namespace tessera::server {

bool is_loopback_listen(std::string_view listen) {
  if (listen.starts_with("unix:")) return true;
  std::string_view host = listen.substr(0, listen.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string lower(host);
  absl::AsciiStrToLower(&lower);
  return lower == "localhost" || lower == "::1" || lower.starts_with("127.");
}

std::optional<std::string> open_listener_warning(std::string_view what, std::string_view listen,
                                                 std::string_view bound_address, bool guarded,
                                                 std::string_view missing) {
  if (guarded || is_loopback_listen(listen)) return std::nullopt;
  return str_cat(what, " on ", bound_address, " is open to anyone who can reach it: ", missing);
}

}  // namespace tessera::server
