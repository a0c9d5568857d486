// What the engine needs from a model: one forward step over a flattened batch. StepRunner is the
// real one; tests use models that do no device work.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>

#include "absl/status/status.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/backend/sampling_math.h"
#include "runtime/backend/step_batch.h"

namespace tessera {

struct ForwardLimits {
  int32_t max_batch_tokens = 2048;  // tokens in one step (prefill chunks + decode tokens)
  int32_t max_logit_rows = 256;     // sequences sampled in one step
};

class ForwardModel {
 public:
  virtual ~ForwardModel() = default;
  virtual int64_t vocab_size() const = 0;
  virtual const ForwardLimits& limits() const = 0;
  // Runs the step; writes fp32 logits [batch.logits_rows.size(), vocab] to `logits`.
  virtual absl::Status forward(const StepBatch& batch, const KvCache& cache,
                               std::span<float> logits) = 0;

  // Whether forward_sampled() is available: the logit rows are sampled where they are computed,
  // and only tokens come back.
  virtual bool can_sample_on_device() const { return false; }
  // Runs the step like forward(), then samples logit row r by rows[r] into tokens[r], with the
  // same math as the host Sampler (runtime/backend/sampling_math.h). The engine calls it only when
  // can_sample_on_device(); a model that cannot answers FAILED_PRECONDITION.
  virtual absl::Status forward_sampled(const StepBatch& batch, const KvCache& cache,
                                       std::span<const SamplingRow> rows,
                                       std::span<int32_t> tokens);

  // Steps run through recorded decode graphs so far (0 for a model that has none). Read on the
  // thread that runs the steps.
  virtual int64_t graph_steps() const { return 0; }
  // Steps split into micro-batches through a split model's stages so far; same thread.
  virtual int64_t micro_batched_steps() const { return 0; }
  // Seconds the last forward()/forward_sampled() spent blocked waiting for the device to finish
  // the step's queued work (0 for a model whose ops run on the calling thread, as the CPU
  // backend's do); the rest of the call is the host issuing work. Same thread.
  virtual double last_device_wait_seconds() const { return 0; }

  // Whether forward()/forward_sampled() queue the step's work on a device and can run host work
  // while it computes (overlap_next_step); false for a model whose ops run on the calling thread.
  virtual bool overlaps_host_work() const { return false; }
  // Host work for the next forward()/forward_sampled() to run on the calling thread while the
  // device computes that step: a model that overlaps_host_work() takes it
  // (take_overlapped_work) once the step is queued and runs it before waiting. What a call
  // leaves untaken, the caller runs after it (StepExecutor does). Same thread.
  void overlap_next_step(std::function<void()> work) { overlapped_ = std::move(work); }
  // The work overlap_next_step() gave, handed over once (empty when none or already taken).
  std::function<void()> take_overlapped_work() { return std::exchange(overlapped_, nullptr); }

 private:
  std::function<void()> overlapped_;
};

inline absl::Status ForwardModel::forward_sampled(const StepBatch&, const KvCache&,
                                                  std::span<const SamplingRow>,
                                                  std::span<int32_t>) {
  return absl::FailedPreconditionError("forward_sampled: this model samples on the host only");
}

}  // namespace tessera
