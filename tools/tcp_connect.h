// Connects a Beast TCP stream to "HOST:PORT", the form every address flag of the CLI takes (the
// OpenAI port, tesserad's admin listener).
#pragma once

#include <string>

#include <boost/beast/core/tcp_stream.hpp>

#include "absl/status/status.h"

namespace tessera::cli {

// INVALID_ARGUMENT when `address` is not HOST:PORT; UNAVAILABLE naming it when it cannot be
// resolved or reached (within `stream`'s expiry, when one is set).
absl::Status connect_host_port(const std::string& address, boost::beast::tcp_stream& stream);

}  // namespace tessera::cli
