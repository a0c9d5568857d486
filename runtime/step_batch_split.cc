#include "runtime/step_batch_split.h"

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
  int32_t count = std::clamp(max_parts, 1, std::max(seqs, 1));
  // Parts are token ranges: each part's logit rows must be a contiguous run of the batch's.
  if (!std::is_sorted(batch.logits_rows.begin(), batch.logits_rows.end())) count = 1;
  parts->resize(count);
  const std::vector<int32_t>& qs = batch.query_start;
  int32_t first_seq = 0;
  size_t logit = 0;
  for (int32_t k = 0; k < count; ++k) {
    // Whole sequences up to about (k + 1) / count of the tokens, leaving one for each later part.
    const int32_t max_end = seqs - (count - 1 - k);
    const int64_t target = static_cast<int64_t>(n) * (k + 1) / count;
    int32_t end = first_seq + 1;
    while (end < max_end && qs[end + 1] <= target) ++end;
    if (k == count - 1) end = seqs;

    StepBatchPart& part = (*parts)[k];
    StepBatch& b = part.batch;
    const int32_t t0 = qs[first_seq], t1 = qs[end];
    assign_range(b.token_ids, batch.token_ids, t0, t1);
    assign_range(b.positions, batch.positions, t0, t1);
    assign_range(b.slot_mapping, batch.slot_mapping, t0, t1);
    b.query_start.clear();
    for (int32_t s = first_seq; s <= end; ++s) b.query_start.push_back(qs[s] - t0);
    assign_range(b.context_len, batch.context_len, first_seq, end);
    b.max_blocks = batch.max_blocks;
    assign_range(b.block_tables, batch.block_tables, static_cast<size_t>(first_seq) * batch.max_blocks,
                 static_cast<size_t>(end) * batch.max_blocks);
    part.first_token = t0;
    part.first_logit_row = static_cast<int32_t>(logit);
    b.logits_rows.clear();
    while (logit < batch.logits_rows.size() && batch.logits_rows[logit] < t1) {
      b.logits_rows.push_back(batch.logits_rows[logit++] - t0);
    }
    first_seq = end;
  }
}

}  // namespace tessera
