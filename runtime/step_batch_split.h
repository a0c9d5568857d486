// Splits one step's batch into micro-batches of whole sequences, so that a model split over
// devices can run them through its pipeline stages concurrently (stage 0 on micro-batch 1 while
// stage 1 runs micro-batch 0). Each part is a StepBatch of its own, rebased so that its token and
// logit-row indices start at 0, plus where its rows sit in the whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/step_batch.h"

namespace tessera {

struct StepBatchPart {
  StepBatch batch;
  int32_t first_token = 0;      // its tokens are the whole batch's [first_token, + num_tokens)
  int32_t first_logit_row = 0;  // its logit rows are the whole batch's [first_logit_row, + n)
};

// Up to `max_parts` parts of about equal token counts, each at least one sequence, in order;
// concatenating the parts' tokens and logit rows gives the batch's. Fewer parts when there are
// fewer sequences, or when the batch's logit rows are not in token order (a single part then).
// `parts` is reused across calls (its vectors keep their capacity).
void split_step_batch(const StepBatch& batch, int32_t max_parts, std::vector<StepBatchPart>* parts);

}  // namespace tessera
