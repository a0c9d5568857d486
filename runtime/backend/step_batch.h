// One engine step's flattened batch: the new tokens of every scheduled sequence (prefill chunks
// and single decode tokens alike), where they sit in the paged KV cache, and whose logits are
// wanted. Built on the host by the engine; a backend copies it to the device once per step.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct StepBatch {
  // Per token: [n_tokens]
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;     // absolute position in its sequence
  // KV slot = block_id * block_size + offset in block; < 0 for a padding token, whose K/V no
  // one keeps (the cache write skips it).
  std::vector<int32_t> slot_mapping;

  // Per sequence: [n_seqs + 1] and [n_seqs]
  std::vector<int32_t> query_start;  // cumulative: sequence s owns tokens [qs[s], qs[s+1])
  std::vector<int32_t> context_len;  // tokens in the cache for s once this step's are written

  // [n_seqs, max_blocks] flattened; -1 past a sequence's last block
  std::vector<int32_t> block_tables;
  int32_t max_blocks = 0;

  // Token rows whose logits are needed (one per sampling sequence): [n_logits]
  std::vector<int32_t> logits_rows;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(context_len.size()); }
  void clear() { *this = StepBatch{}; }
};

}  // namespace tessera
