// A non-blocking listening TCP socket for "HOST:PORT".
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::server {

struct HostPort {
  std::string host;  // without brackets ("::1")
  int port = 0;
};

// "127.0.0.1:8002", "0.0.0.0:0", "[::1]:8002", "localhost:8002". Errors name the address and
// say what is expected.
absl::StatusOr<HostPort> parse_host_port(std::string_view address);

struct ListenSocket {
  int fd = -1;   // non-blocking, close-on-exec; the caller closes it
  int port = 0;  // the bound port (the chosen one when the address asked for 0)
};

// Binds and listens (SO_REUSEADDR). Errors: INVALID_ARGUMENT for a malformed address,
// UNAVAILABLE naming the address and the system error when it cannot be resolved or bound.
absl::StatusOr<ListenSocket> open_listen_socket(std::string_view address, int backlog = 128);

}  // namespace tessera::server
