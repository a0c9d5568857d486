// The admin listener's standard routes:
//   GET /metrics  Prometheus text format 0.0.4 from `metrics_text` (TesseraMetrics::serialize)
//   GET /healthz  200 "ok" while the process can answer at all
//   GET /readyz   200 "ready" when `readiness` says so; otherwise 503 with the reason
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "server/http/http_server.h"
#include "server/metrics/readiness_state.h"

namespace tessera::server {

// Adds the three routes to `server` (before its start()). `readiness` and whatever
// `metrics_text` uses must outlive the server's stop().
absl::Status add_admin_routes(HttpServer& server, const ReadinessState& readiness,
                              std::function<std::string()> metrics_text);

}  // namespace tessera::server
