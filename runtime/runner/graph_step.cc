#include "runtime/runner/graph_step.h"

#include <algorithm>
#include <bit>

namespace tessera {

bool is_decode_step(const StepBatch& batch) {
  const int32_t n = batch.num_tokens();
  if (n == 0 || batch.num_seqs() != n || static_cast<int32_t>(batch.logits_rows.size()) != n) {
    return false;
  }
  for (int32_t s = 0; s < n; ++s) {
    if (batch.query_start[s + 1] - batch.query_start[s] != 1 || batch.logits_rows[s] != s) return false;
  }
  return true;
}

int32_t graph_context_class(const StepBatch& batch) {
  const int32_t longest = batch.context_len.empty()
                              ? 0
                              : *std::max_element(batch.context_len.begin(), batch.context_len.end());
  return static_cast<int32_t>(
      std::bit_ceil(static_cast<uint32_t>(std::max(longest, kMinGraphContext))));
}

void pad_decode_step(const StepBatch& batch, int32_t bucket, int32_t max_context,
                     int32_t block_size, StepBatch* out) {
  const int32_t n = batch.num_tokens();
  const int32_t width = (max_context + block_size - 1) / block_size;
  auto padded = [&](std::vector<int32_t>& dst, const std::vector<int32_t>& src, int32_t fill) {
    dst.assign(src.begin(), src.end());
    dst.resize(bucket, fill);
  };
  padded(out->token_ids, batch.token_ids, 0);
  padded(out->positions, batch.positions, 0);
  padded(out->slot_mapping, batch.slot_mapping, -1);
  padded(out->context_len, batch.context_len, 1);
  out->query_start.resize(bucket + 1);
  out->logits_rows.resize(bucket);
  for (int32_t s = 0; s <= bucket; ++s) out->query_start[s] = s;
  for (int32_t s = 0; s < bucket; ++s) out->logits_rows[s] = s;
  out->max_blocks = width;
  out->block_tables.assign(static_cast<size_t>(bucket) * width, -1);
  for (int32_t s = 0; s < bucket; ++s) {
    int32_t* row = out->block_tables.data() + static_cast<size_t>(s) * width;
    if (s < n) {
      const int32_t* src = batch.block_tables.data() + static_cast<size_t>(s) * batch.max_blocks;
      std::copy(src, src + std::min(batch.max_blocks, width), row);
    } else {
      row[0] = 0;  // the padding sequence's one key: block 0, slot 0
    }
  }
}

uint64_t graph_key(uint32_t model, size_t stage, int32_t bucket, int32_t max_context) {
  // model: 16 bits, stage: 8, log2(max_context): 8, bucket: 32.
  return (static_cast<uint64_t>(model & 0xffff) << 48) | (static_cast<uint64_t>(stage & 0xff) << 40) |
         (static_cast<uint64_t>(std::countr_zero(static_cast<uint32_t>(max_context))) << 32) |
         static_cast<uint64_t>(static_cast<uint32_t>(bucket));
}

}  // namespace tessera
