// The admin listener's prefix-cache route; it needs the admin token when one is configured.
//
//   POST /v1/prefix_cache/reset   drops every cached prefix (the engine runs the reset at its
//                                 next step; blocks still in use keep their K/V but are shared
//                                 and cached no more). 200 with {"dropped_blocks": N} once the
//                                 engine has run it; 503 before the model is loaded.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "runtime/engine.h"
#include "server/http/http_server.h"

namespace tessera::server {

// `engine` answers the served model's engine, or null before it is loaded.
absl::Status add_prefix_cache_routes(HttpServer& server, std::function<Engine*()> engine);

}  // namespace tessera::server
