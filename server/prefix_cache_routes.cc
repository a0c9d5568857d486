#include "server/prefix_cache_routes.h"

#include <future>

#include "base/status_macros.h"
#include "server/json_responses.h"

namespace tessera::server {

absl::Status add_prefix_cache_routes(HttpServer& server, std::function<Engine*()> engine) {
  return server.add_route(
      "POST", "/v1/prefix_cache/reset",
      [engine](const HttpRequest&) {
        Engine* e = engine();
        if (e == nullptr) return error_response(503, "the model is still loading");
        std::future<int32_t> dropped = e->reset_prefix_cache();
        if (dropped.wait_for(kResetWait) != std::future_status::ready) {
          return error_response(503, "the engine did not run the reset in time; it runs at its "
                                     "next step");
        }
        return json_response(200, nlohmann::json{{"dropped_blocks", dropped.get()}});
      },
      /*token_required=*/true);
}

}  // namespace tessera::server
