// Warmup between the API and the runtime: a WarmupRequest (gRPC, or the HTTP endpoint's JSON
// read into one) becomes a WarmupSpec; tuning reports become TunedGemm messages.
#pragma once

#include "absl/status/statusor.h"
#include "runtime/tuning/model_tuning.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// The request's options over the server's defaults (tuning.default_spec()). Errors name the
// field: decode_buckets not ascending or not positive, a negative prefill_pad or
// max_prefill_tokens, max_prefill_tokens above the engine's max_batch_tokens, a negative or
// non-finite time_budget_seconds.
absl::StatusOr<WarmupSpec> warmup_spec(const tessera::v1::WarmupRequest& request,
                                       const ModelTuning& tuning);

tessera::v1::TunedGemm tuned_gemm_proto(const GemmTuneReport& report);

// The final message of a Warmup stream: counts, state, summary and the whole table.
tessera::v1::WarmupProgress final_progress(const WarmupSnapshot& snapshot);

}  // namespace tessera::server
