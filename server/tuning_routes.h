// The admin listener's GEMM tuning routes. POST needs the admin token when one is configured;
// GET answers everyone, but only a caller presenting the admin token sees the host details.
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
//                            (state, done/total, summary, its table). Without the admin token
//                            (or when none is configured) each device lacks results_file,
//                            validators and load_warnings: they name host paths, the CPU or
//                            GPU model and the BLAS build; the tuned GEMMs, the counters and
//                            the warmup stay (they describe the model's shapes).
//
// Handlers run on the listener's thread and return at once: the warmup runs on its own threads.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "runtime/tuning/model_tuning.h"
#include "server/http/http_server.h"

namespace tessera::server {

// `tuning` answers the served model's tuning, or null before it is loaded. `admin_token`: the
// configured admin token (empty = none; then nobody sees the host details).
absl::Status add_tuning_routes(HttpServer& server, std::function<ModelTuning*()> tuning,
                               std::string admin_token);

}  // namespace tessera::server
