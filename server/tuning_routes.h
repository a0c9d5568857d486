// The admin listener's GEMM tuning routes; both need the admin token when one is configured.
//
//   POST /v1/tuning/warmup   starts a warmup; optional JSON body with the fields of
//                            tessera.v1.WarmupRequest ({"decode_buckets": [1, 2, 4],
//                            "prefill_pad": 64, "max_prefill_tokens": 256,
//                            "time_budget_seconds": 60, "force": true}). 202 with
//                            {"state": "running", "total": N}; 400 for a bad body; 409 while a
//                            warmup runs or when the tuning mode does not tune; 503 before the
//                            model is loaded.
//   GET  /v1/tuning          JSON: the mode, each device's results file (path, validators,
//                            load warnings, tuned GEMMs), the counters, and the last warmup
//                            (state, done/total, summary, its table).
//
// Handlers run on the listener's thread and return at once: the warmup runs on its own threads.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "runtime/tuning/model_tuning.h"
#include "server/http/http_server.h"

namespace tessera::server {

// `tuning` answers the served model's tuning, or null before it is loaded.
absl::Status add_tuning_routes(HttpServer& server, std::function<ModelTuning*()> tuning);

}  // namespace tessera::server
