// The decode-graph step: which steps qualify, the context class, the padded batch and the keys.
#include "runtime/runner/graph_step.h"

#include <set>

#include <gtest/gtest.h>

namespace tessera {
namespace {

// Decode step of sequences with the given contexts; sequence s holds blocks 10s.. (block size 4).
StepBatch decode_step(const std::vector<int32_t>& contexts) {
  StepBatch b;
  b.max_blocks = 0;
  for (int32_t c : contexts) b.max_blocks = std::max(b.max_blocks, (c + 3) / 4);
  b.query_start.push_back(0);
  for (size_t s = 0; s < contexts.size(); ++s) {
    const int32_t pos = contexts[s] - 1;
    const int32_t block = 10 * static_cast<int32_t>(s) + pos / 4;
    b.token_ids.push_back(100 + static_cast<int32_t>(s));
    b.positions.push_back(pos);
    b.slot_mapping.push_back(block * 4 + pos % 4);
    b.query_start.push_back(static_cast<int32_t>(s) + 1);
    b.context_len.push_back(contexts[s]);
    b.logits_rows.push_back(static_cast<int32_t>(s));
    for (int32_t j = 0; j < b.max_blocks; ++j) {
      b.block_tables.push_back(j * 4 < contexts[s] ? 10 * static_cast<int32_t>(s) + j : -1);
    }
  }
  return b;
}

TEST(GraphStep, OnlyDecodeStepsQualify) {
  EXPECT_TRUE(is_decode_step(decode_step({5, 9, 1})));
  EXPECT_FALSE(is_decode_step(StepBatch{}));
  StepBatch prefill = decode_step({5, 9});
  prefill.token_ids.push_back(7);  // sequence 1 gets a second new token
  prefill.positions.push_back(9);
  prefill.slot_mapping.push_back(0);
  prefill.query_start[2] = 3;
  prefill.logits_rows[1] = 2;
  EXPECT_FALSE(is_decode_step(prefill));
  StepBatch unsampled = decode_step({5, 9});
  unsampled.logits_rows.pop_back();  // a sequence whose logits nobody wants
  EXPECT_FALSE(is_decode_step(unsampled));
}

TEST(GraphStep, ContextClassIsAPowerOfTwoFromTheMinimum) {
  EXPECT_EQ(graph_context_class(decode_step({1})), kMinGraphContext);
  EXPECT_EQ(graph_context_class(decode_step({kMinGraphContext})), kMinGraphContext);
  EXPECT_EQ(graph_context_class(decode_step({3, kMinGraphContext + 1})), 2 * kMinGraphContext);
  EXPECT_EQ(graph_context_class(decode_step({5000})), 8192);
}

TEST(GraphStep, PaddingSequencesTouchNothing) {
  const StepBatch in = decode_step({5, 9, 1});
  StepBatch out;
  pad_decode_step(in, 8, 512, 4, &out);
  ASSERT_EQ(out.num_tokens(), 8);
  ASSERT_EQ(out.num_seqs(), 8);
  EXPECT_TRUE(is_decode_step(out));
  EXPECT_EQ(out.max_blocks, 128);
  ASSERT_EQ(out.block_tables.size(), 8u * 128u);
  for (int32_t s = 0; s < 8; ++s) {
    const int32_t* row = out.block_tables.data() + s * 128;
    if (s < 3) {
      // The real sequences keep their tokens, positions, slots and blocks; the rest is -1.
      EXPECT_EQ(out.token_ids[s], in.token_ids[s]);
      EXPECT_EQ(out.positions[s], in.positions[s]);
      EXPECT_EQ(out.slot_mapping[s], in.slot_mapping[s]);
      EXPECT_EQ(out.context_len[s], in.context_len[s]);
      for (int32_t j = 0; j < 128; ++j) {
        EXPECT_EQ(row[j], j < in.max_blocks ? in.block_tables[s * in.max_blocks + j] : -1) << s << " " << j;
      }
    } else {
      // Padding: one key at position 0 over block 0, and no cache write.
      EXPECT_EQ(out.positions[s], 0);
      EXPECT_EQ(out.slot_mapping[s], -1);
      EXPECT_EQ(out.context_len[s], 1);
      EXPECT_EQ(row[0], 0);
      for (int32_t j = 1; j < 128; ++j) EXPECT_EQ(row[j], -1);
    }
  }
  // Reused output: a smaller bucket leaves nothing of the larger one behind.
  pad_decode_step(decode_step({2}), 1, 512, 16, &out);
  EXPECT_EQ(out.num_tokens(), 1);
  EXPECT_EQ(out.max_blocks, 32);
  EXPECT_EQ(out.block_tables.size(), 32u);
  EXPECT_EQ(out.query_start, (std::vector<int32_t>{0, 1}));
}

TEST(GraphStep, KeysSeparateModelsStagesBucketsAndContexts) {
  std::set<uint64_t> keys;
  for (uint32_t model : {0u, 1u}) {
    for (size_t stage : {0, 1}) {
      for (int32_t bucket : {1, 2, 256}) {
        for (int32_t ctx : {512, 1024, 131072}) keys.insert(graph_key(model, stage, bucket, ctx));
      }
    }
  }
  EXPECT_EQ(keys.size(), 2u * 2u * 3u * 3u);
}

}  // namespace
}  // namespace tessera
