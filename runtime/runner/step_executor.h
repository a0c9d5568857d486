// A step's execute phase: runs the batch through the model and draws each sampled row's token.
// The sampling choice is made here: on the model's device when it can sample there and every
// row is plain (no penalties, no logprobs: Sampler::plain_row), so that only tokens come back;
// otherwise the fp32 logits come to the host and each row's Sampler draws from them. Either way a
// row's token is the same (seed, counter) draw.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend/sampling_math.h"
#include "runtime/backend/step_batch.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/request/sampler.h"
#include "runtime/runner/forward_model.h"

namespace tessera {

// Who draws one logit row: a sequence's sampler, at its counter (tokens it has generated).
struct RowSampler {
  Sampler* sampler = nullptr;
  uint64_t counter = 0;
};

class StepExecutor {
 public:
  explicit StepExecutor(ForwardModel& model);

  // Runs `batch` and samples its logit rows, row r by rows[r]; `while_device_runs` (may be
  // empty) runs once: where the model overlaps host work (ForwardModel::overlap_next_step), when
  // the model takes it (during the step's device work, or before queuing a slow-to-queue step)
  // or, if it did not (an error first), after the call; else before the step. The results are
  // valid until the next call.
  // A token is -1 where the logits were not finite.
  absl::StatusOr<std::span<const SampleResult>> run(const StepBatch& batch, const KvCache& cache,
                                                    std::span<const RowSampler> rows,
                                                    std::function<void()> while_device_runs = {});
  ForwardModel& model() { return model_; }

 private:
  // run() without the overlapped work's bookkeeping.
  absl::StatusOr<std::span<const SampleResult>> run_model(const StepBatch& batch,
                                                          const KvCache& cache,
                                                          std::span<const RowSampler> rows);
  // Whether the rows are sampled on the device: when the model can and every row is plain;
  // fills device_rows_ then.
  bool samples_on_device(std::span<const RowSampler> rows);

  ForwardModel& model_;
  std::vector<float> logits_;             // [max_logit_rows, vocab] the host path's logits
  std::vector<SamplingRow> device_rows_;  // [logit rows] when the device samples
  std::vector<int32_t> tokens_;           // [max_logit_rows] the tokens it sampled
  std::vector<SampleResult> results_;     // [logit rows]
  SamplingScratch scratch_;               // the host sampler's vocab-sized buffers, for every row
};

}  // namespace tessera
