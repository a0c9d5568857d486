// The OpenAI API's key: config api_key, else the first line of api_key_file, else the
// TESSERA_API_KEY environment variable; empty = the API is open (the daemon warns at start).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "server/daemon_config.h"

namespace tessera::server {

// `getenv` reads the environment (std::getenv in the daemon). Errors name api_key_file when it
// cannot be read or its first line is empty.
absl::StatusOr<std::string> resolve_api_key(const DaemonConfig& config,
                                            const std::function<const char*(const char*)>& getenv);

}  // namespace tessera::server
