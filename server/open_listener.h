// The one warning for a listener that anyone who can reach it may use: an address other than
// loopback (or a unix socket) with no credential in front of it. tesserad logs it at start for
// the gRPC port (no API key, no mTLS), the OpenAI port (no API key) and the admin listener (no
// admin token for its mutating routes).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera::server {

// True for unix:PATH and for HOST:PORT whose HOST is localhost, 127.0.0.0/8 or ::1 ([::1]).
// Anything else, including 0.0.0.0 and [::], is reachable from other hosts.
bool is_loopback_listen(std::string_view listen);

// "<what> on <address> is open to anyone who can reach it: <missing>" when `listen` is not
// loopback and `guarded` is false; nullopt otherwise. `missing` names the keys that would close
// it ("no API key (api_key, api_key_file or TESSERA_API_KEY) and no mTLS (tls_client_ca)").
std::optional<std::string> open_listener_warning(std::string_view what, std::string_view listen,
                                                 std::string_view bound_address, bool guarded,
                                                 std::string_view missing);

}  // namespace tessera::server
