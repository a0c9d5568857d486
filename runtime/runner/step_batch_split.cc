#include "runtime/runner/step_batch_split.h"

#include <algorithm>
#include <cstddef>

namespace tessera {

namespace {

template <typename T>
void assign_range(std::vector<T>& dst, const std::vector<T>& src, size_t begin, size_t end) {
  dst.assign(src.begin() + static_cast<std::ptrdiff_t>(begin), src.begin() + static_cast<std::ptrdiff_t>(end));
}

}  // namespace

void split_step_batch(const StepBatch& batch, int32_t max_parts, std::vector<StepBatchPart>* parts) {
  const int32_t seqs = batch.num_seqs(), n = batch.num_tokens();
  int32_t count = std::clamp(max_parts, 1, std::max(n, 1));
  // Parts are token ranges: each part's logit rows must be a contiguous run of the batch's.
  if (!std::is_sorted(batch.logits_rows.begin(), batch.logits_rows.end())) count = 1;
  parts->resize(count);
  const std::vector<int32_t>& qs = batch.query_start;
  int32_t seq = 0;
  size_t logit = 0;
  for (int32_t k = 0; k < count; ++k) {
    const int32_t t0 = static_cast<int32_t>(static_cast<int64_t>(n) * k / count);
    const int32_t t1 = static_cast<int32_t>(static_cast<int64_t>(n) * (k + 1) / count);
    StepBatchPart& part = (*parts)[k];
    StepBatch& b = part.batch;
    assign_range(b.token_ids, batch.token_ids, t0, t1);
    assign_range(b.positions, batch.positions, t0, t1);
    assign_range(b.slot_mapping, batch.slot_mapping, t0, t1);
    b.max_blocks = batch.max_blocks;
    b.query_start.assign(1, 0);
    b.context_len.clear();
    b.block_tables.clear();
    // The sequences with tokens in [t0, t1): the first may have begun in the previous part, the
    // last may go on in the next, whose tokens are not in the cache yet when this part runs.
    while (seq < seqs && qs[seq + 1] <= t0) ++seq;
    for (int32_t s = seq; s < seqs && qs[s] < t1; ++s) {
      const int32_t end = std::min(qs[s + 1], t1);
      b.query_start.push_back(end - t0);
      b.context_len.push_back(batch.context_len[s] - (qs[s + 1] - end));
      const size_t row = static_cast<size_t>(s) * batch.max_blocks;
      b.block_tables.insert(b.block_tables.end(), batch.block_tables.begin() + static_cast<std::ptrdiff_t>(row),
                            batch.block_tables.begin() + static_cast<std::ptrdiff_t>(row + batch.max_blocks));
    }
    part.first_token = t0;
    part.first_logit_row = static_cast<int32_t>(logit);
    b.logits_rows.clear();
    while (logit < batch.logits_rows.size() && batch.logits_rows[logit] < t1) {
      b.logits_rows.push_back(batch.logits_rows[logit++] - t0);
    }
  }
}

}  // namespace tessera
