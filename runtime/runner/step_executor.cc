#include "runtime/runner/step_executor.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace tessera {

StepExecutor::StepExecutor(ForwardModel& model)
    : model_(model),
      logits_(static_cast<size_t>(model.limits().max_logit_rows) * model.vocab_size()),
      tokens_(static_cast<size_t>(model.limits().max_logit_rows)) {}

absl::StatusOr<std::span<const SampleResult>> StepExecutor::run(
    const StepBatch& batch, const KvCache& cache, std::span<const RowSampler> rows,
    std::function<void()> while_device_runs) {
  if (model_.overlaps_host_work()) {
    model_.overlap_next_step(std::move(while_device_runs));
  } else if (while_device_runs) {
    while_device_runs();  // no device time to hide it in: at once, not a step late
  }
  absl::StatusOr<std::span<const SampleResult>> result = run_model(batch, cache, rows);
  // What the model did not take (it computes on this thread, or failed before queuing).
  if (std::function<void()> left = model_.take_overlapped_work()) left();
  return result;
}

absl::StatusOr<std::span<const SampleResult>> StepExecutor::run_model(
    const StepBatch& batch, const KvCache& cache, std::span<const RowSampler> rows) {
  const size_t n_rows = batch.logits_rows.size();
  if (rows.size() != n_rows) {
    return absl::InternalError(absl::StrCat("step: ", rows.size(), " samplers for ", n_rows,
                                            " logit rows"));
  }
  const int64_t vocab = model_.vocab_size();
  results_.assign(n_rows, SampleResult{});
  if (samples_on_device(rows)) {
    const std::span<int32_t> tokens(tokens_.data(), n_rows);
    if (absl::Status s = model_.forward_sampled(batch, cache, device_rows_, tokens); !s.ok()) return s;
    for (size_t r = 0; r < n_rows; ++r) results_[r].token = tokens[r];
    return results_;
  }
  const std::span<float> logits(logits_.data(), n_rows * vocab);
  if (absl::Status s = model_.forward(batch, cache, logits); !s.ok()) return s;
  for (size_t r = 0; r < n_rows; ++r) {
    results_[r] = rows[r].sampler->sample(logits.subspan(r * vocab, vocab), rows[r].counter, scratch_);
  }
  return results_;
}

bool StepExecutor::samples_on_device(std::span<const RowSampler> rows) {
  if (!model_.can_sample_on_device()) return false;
  device_rows_.clear();
  for (const RowSampler& r : rows) {
    const std::optional<SamplingRow> row = r.sampler->plain_row(r.counter);
    // One row that needs penalties or logprobs sends the whole step's logits to the host.
    if (!row) return false;
    device_rows_.push_back(*row);
  }
  return true;
}

}  // namespace tessera
