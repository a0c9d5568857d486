// Splits one step's batch into micro-batches of about equal token counts, so that a model split
// over devices can run them through its pipeline stages concurrently (stage 0 on micro-batch 1
// while stage 1 runs micro-batch 0). A sequence's tokens may be cut between consecutive parts:
// the earlier part then carries them as a shorter chunk (its context ends where the part does),
// and the later part reads their K/V from the cache, which the earlier part wrote on every stage
// before it (each stage runs the parts in order). Each part is a StepBatch of its own, rebased so
// that its token and logit-row indices start at 0, plus where its rows sit in the whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/backend/step_batch.h"

namespace tessera {

struct StepBatchPart {
  StepBatch batch;
  int32_t first_token = 0;      // its tokens are the whole batch's [first_token, + num_tokens)
  int32_t first_logit_row = 0;  // its logit rows are the whole batch's [first_logit_row, + n)
};

// Up to `max_parts` parts of equal token counts (within one), each at least one token, in
// order; concatenating the parts' tokens and logit rows gives the batch's. Fewer parts when there
// are fewer tokens, and a single part when the batch's logit rows are not in token order.
// `parts` is reused across calls (its vectors keep their capacity).
void split_step_batch(const StepBatch& batch, int32_t max_parts, std::vector<StepBatchPart>* parts);

}  // namespace tessera
