// Test helpers shared by the family and tensor-parallel checks: a prompt's logits in one prefill
// step straight through the runner, and the relative error of two logit vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model_instance.h"

namespace tessera::testing {

// fp32 logits after `prompt`, in one prefill step straight through the runner.
inline std::vector<float> prompt_logits(ModelInstance& m, const std::vector<int32_t>& prompt) {
  const int32_t n = static_cast<int32_t>(prompt.size()), bs = m.cache().block_size();
  BlockTable table;
  EXPECT_TRUE(table.reserve(n, bs, m.cache().allocator()));
  StepBatch batch;
  batch.query_start = {0, n};
  batch.context_len = {n};
  batch.block_tables = table.blocks();
  batch.max_blocks = table.num_blocks();
  for (int32_t p = 0; p < n; ++p) {
    batch.token_ids.push_back(prompt[p]);
    batch.positions.push_back(p);
    batch.slot_mapping.push_back(table.slot(p, bs));
  }
  batch.logits_rows = {n - 1};
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  const absl::Status s = m.runner().forward(batch, m.cache(), logits);
  EXPECT_TRUE(s.ok()) << s;
  table.release(m.cache().allocator());
  return logits;
}

// ||got - want|| / ||want|| (infinite when the sizes differ).
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return got.size() == want.size() ? std::sqrt(num / den) : INFINITY;
}

}  // namespace tessera::testing
