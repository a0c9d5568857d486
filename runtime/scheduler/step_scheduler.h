// What runs this step: every decoding sequence's next token, then prefill chunks of the
// prefilling sequences (oldest first) until the token budget is spent. The result is one
// flattened StepBatch, so decode and chunked prefill share each forward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/scheduler/sequence.h"
#include "runtime/backend/step_batch.h"

namespace tessera {

struct ScheduledChunk {
  Sequence* seq;
  int32_t num_tokens;  // run this many of its pending tokens
  bool samples;        // the chunk reaches the sequence's end: sample its next token
};

class StepScheduler {
 public:
  StepScheduler(int32_t max_batch_tokens, int32_t block_size)
      : max_batch_tokens_(max_batch_tokens), block_size_(block_size) {}

  // Chooses the chunks (running is in arrival order) and fills `batch` (cleared first).
  std::vector<ScheduledChunk> schedule(const std::vector<Sequence*>& running, StepBatch& batch) const;

 private:
  int32_t max_batch_tokens_;
  int32_t block_size_;
};

}  // namespace tessera
