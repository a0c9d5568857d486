// What the engine needs from a model: one forward step over a flattened batch. LlamaModel is the
// real one; tests use models that do no device work.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "runtime/kv_cache.h"
#include "runtime/step_batch.h"

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
};

}  // namespace tessera
