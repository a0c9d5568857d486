#include "runtime/step_batch_split.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// Three sequences: a 5-token prefill chunk (no logits: mid-prompt), then two decode tokens, each
// sampled. Block tables of 2 blocks each.
StepBatch three_sequences() {
  StepBatch b;
  b.token_ids = {10, 11, 12, 13, 14, 20, 30};
  b.positions = {0, 1, 2, 3, 4, 7, 9};
  b.slot_mapping = {0, 1, 2, 3, 4, 39, 73};
  b.query_start = {0, 5, 6, 7};
  b.context_len = {5, 8, 10};
  b.max_blocks = 2;
  b.block_tables = {0, -1, 2, -1, 4, -1};
  b.logits_rows = {5, 6};
  return b;
}

TEST(StepBatchSplit, PartsAreRebasedWholeSequences) {
  std::vector<StepBatchPart> parts;
  split_step_batch(three_sequences(), 2, &parts);
  ASSERT_EQ(parts.size(), 2u);
  // ~3.5 tokens each: the 5-token sequence alone, then the two decode tokens.
  EXPECT_EQ(parts[0].first_token, 0);
  EXPECT_EQ(parts[0].batch.token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(parts[0].batch.query_start, (std::vector<int32_t>{0, 5}));
  EXPECT_TRUE(parts[0].batch.logits_rows.empty());
  EXPECT_EQ(parts[0].batch.block_tables, (std::vector<int32_t>{0, -1}));

  EXPECT_EQ(parts[1].first_token, 5);
  EXPECT_EQ(parts[1].first_logit_row, 0);
  EXPECT_EQ(parts[1].batch.token_ids, (std::vector<int32_t>{20, 30}));
  EXPECT_EQ(parts[1].batch.positions, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(parts[1].batch.slot_mapping, (std::vector<int32_t>{39, 73}));
  EXPECT_EQ(parts[1].batch.query_start, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(parts[1].batch.context_len, (std::vector<int32_t>{8, 10}));
  EXPECT_EQ(parts[1].batch.block_tables, (std::vector<int32_t>{2, -1, 4, -1}));
  EXPECT_EQ(parts[1].batch.logits_rows, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(parts[1].batch.max_blocks, 2);
}

TEST(StepBatchSplit, NeverMorePartsThanSequences) {
  std::vector<StepBatchPart> parts;
  split_step_batch(three_sequences(), 8, &parts);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].first_token, 6);
  EXPECT_EQ(parts[2].first_logit_row, 1);
  EXPECT_EQ(parts[2].batch.logits_rows, (std::vector<int32_t>{0}));
}

TEST(StepBatchSplit, OnePartIsTheWholeBatch) {
  std::vector<StepBatchPart> parts;
  const StepBatch b = three_sequences();
  split_step_batch(b, 1, &parts);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].batch.token_ids, b.token_ids);
  EXPECT_EQ(parts[0].batch.query_start, b.query_start);
  EXPECT_EQ(parts[0].batch.logits_rows, b.logits_rows);
}

TEST(StepBatchSplit, UnorderedLogitRowsStayInOnePart) {
  StepBatch b = three_sequences();
  b.logits_rows = {6, 5};
  std::vector<StepBatchPart> parts;
  split_step_batch(b, 3, &parts);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].batch.logits_rows, (std::vector<int32_t>{6, 5}));
}

}  // namespace
}  // namespace tessera
