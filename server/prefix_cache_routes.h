// The admin listener's prefix-cache route; it needs the admin token when one is configured.
//
//   POST /v1/prefix_cache/reset   drops every cached prefix (the engine runs the reset at its
//                                 next step; blocks still in use keep their K/V but are shared
//                                 and cached no more). 200 with {"dropped_blocks": N}; 503 before
//                                 the model is loaded or when the engine did not get to it within
//                                 kResetWait.
#pragma once

#include <chrono>
#include <functional>

#include "absl/status/status.h"
#include "runtime/engine.h"
#include "server/http/http_server.h"

namespace tessera::server {

// How long the handler waits for the engine to run the reset (one engine step, or the wake of an
// idle engine).
inline constexpr std::chrono::seconds kResetWait{10};

// `engine` answers the served model's engine, or null before it is loaded.
absl::Status add_prefix_cache_routes(HttpServer& server, std::function<Engine*()> engine);

}  // namespace tessera::server
