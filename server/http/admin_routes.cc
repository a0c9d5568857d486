#include "server/http/admin_routes.h"

#include <utility>

#include "base/status_macros.h"

namespace tessera::server {

absl::Status add_admin_routes(HttpServer& server, const ReadinessState& readiness,
                              std::function<std::string()> metrics_text) {
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "GET", "/metrics", [metrics_text = std::move(metrics_text)](const HttpRequest&) {
        HttpResponse response;
        response.content_type = "text/plain; version=0.0.4; charset=utf-8";
        response.body = metrics_text();
        return response;
      }));
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "GET", "/healthz", [](const HttpRequest&) { return HttpResponse::text(200, "ok"); }));
  TESSERA_RETURN_IF_ERROR(server.add_route("GET", "/readyz", [&readiness](const HttpRequest&) {
    std::string reason = readiness.not_ready_reason();
    if (reason.empty()) return HttpResponse::text(200, "ready");
    return HttpResponse::text(503, std::move(reason));
  }));
  return absl::OkStatus();
}

}  // namespace tessera::server
