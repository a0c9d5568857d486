#include "server/warmup_proto.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera::server {

absl::StatusOr<WarmupSpec> warmup_spec(const tessera::v1::WarmupRequest& request,
                                       const ModelTuning& tuning) {
  WarmupSpec spec = tuning.default_spec();
  if (request.decode_buckets_size() > 0) {
    spec.buckets.decode.assign(request.decode_buckets().begin(), request.decode_buckets().end());
  }
  if (request.prefill_pad() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill_pad is ", request.prefill_pad(), " (0 = the server's, or positive)"));
  }
  if (request.prefill_pad() > 0) spec.buckets.prefill_pad = request.prefill_pad();
  if (absl::Status s = spec.buckets.validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("decode_buckets / prefill_pad: ", s.message()));
  }
  const int64_t max_tokens = request.max_prefill_tokens();
  if (max_tokens < 0 || max_tokens > tuning.limits().max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_prefill_tokens is ", max_tokens, " (allowed: 0 = the server's max_batch_tokens, or 1..",
        tuning.limits().max_batch_tokens, ")"));
  }
  if (max_tokens > 0) spec.limits.max_batch_tokens = max_tokens;
  const double budget = request.time_budget_seconds();
  if (!std::isfinite(budget) || budget < 0) {
    return absl::InvalidArgumentError(absl::StrCat("time_budget_seconds is ", budget,
                                                   " (allowed: 0 = no budget, or positive)"));
  }
  spec.options.time_budget_seconds = budget;
  spec.options.force = request.force();
  return spec;
}

tessera::v1::TunedGemm tuned_gemm_proto(const GemmTuneReport& report) {
  tessera::v1::TunedGemm g;
  g.set_device(report.device);
  g.set_op(report.signature.op_name());
  g.set_params(report.signature.params());
  g.set_used_by(report.used_by);
  g.set_outcome(gemm_tune_outcome_name(report.outcome));
  g.set_solution(report.solution);
  g.set_avg_ms(report.avg_ms);
  g.set_default_ms(report.default_ms);
  g.set_gain(report.gain);
  g.set_message(report.message);
  return g;
}

tessera::v1::WarmupProgress final_progress(const WarmupSnapshot& snapshot) {
  tessera::v1::WarmupProgress p;
  p.set_done(static_cast<int64_t>(snapshot.done));
  p.set_total(static_cast<int64_t>(snapshot.total));
  p.set_state(warmup_state_name(snapshot.state));
  p.set_elapsed_seconds(snapshot.elapsed_seconds);
  for (const GemmTuneReport& r : snapshot.reports) *p.add_table() = tuned_gemm_proto(r);
  p.set_summary(snapshot.message);
  return p;
}

}  // namespace tessera::server
