#include "runtime/scheduler/step_scheduler.h"

#include <algorithm>

namespace tessera {

std::vector<ScheduledChunk> StepScheduler::schedule(const std::vector<Sequence*>& running,
                                                    StepBatch& batch) const {
  std::vector<ScheduledChunk> chunks;
  int32_t budget = max_batch_tokens_;
  // Decode tokens first: they are latency-critical and cost one token each.
  for (Sequence* seq : running) {
    if (budget == 0) break;
    if (!seq->prefilling()) {
      chunks.push_back({seq, 1, true});
      --budget;
    }
  }
  for (Sequence* seq : running) {
    if (budget == 0) break;
    if (seq->prefilling()) {
      const int32_t n = std::min(seq->pending(), budget);
      chunks.push_back({seq, n, n == seq->pending()});
      budget -= n;
    }
  }

  batch.clear();
  int32_t max_blocks = 0;
  for (const ScheduledChunk& c : chunks) max_blocks = std::max(max_blocks, c.seq->blocks.num_blocks());
  batch.max_blocks = max_blocks;
  batch.query_start.push_back(0);
  for (const ScheduledChunk& c : chunks) {
    Sequence& seq = *c.seq;
    for (int32_t i = 0; i < c.num_tokens; ++i) {
      const int32_t pos = seq.num_computed + i;
      batch.token_ids.push_back(seq.tokens[pos]);
      batch.positions.push_back(pos);
      batch.slot_mapping.push_back(seq.blocks.slot(pos, block_size_));
    }
    batch.query_start.push_back(batch.num_tokens());
    batch.context_len.push_back(seq.num_computed + c.num_tokens);
    const std::vector<int32_t>& blocks = seq.blocks.blocks();
    batch.block_tables.insert(batch.block_tables.end(), blocks.begin(), blocks.end());
    batch.block_tables.insert(batch.block_tables.end(), max_blocks - blocks.size(), -1);
    if (c.samples) batch.logits_rows.push_back(batch.num_tokens() - 1);
  }
  return chunks;
}

}  // namespace tessera
