#include "runtime/runner/step_batch_split.h"

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

TEST(StepBatchSplit, PartsAreRebasedTokenRanges) {
  std::vector<StepBatchPart> parts;
  split_step_batch(three_sequences(), 2, &parts);
  ASSERT_EQ(parts.size(), 2u);
  // 3 and 4 tokens: the prefill chunk is cut after its third token. The first part carries those
  // three as a chunk whose context ends with them; the second the chunk's last two, whose
  // attention reads the first three from the cache.
  EXPECT_EQ(parts[0].first_token, 0);
  EXPECT_EQ(parts[0].batch.token_ids, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(parts[0].batch.positions, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(parts[0].batch.query_start, (std::vector<int32_t>{0, 3}));
  EXPECT_EQ(parts[0].batch.context_len, (std::vector<int32_t>{3}));
  EXPECT_TRUE(parts[0].batch.logits_rows.empty());
  EXPECT_EQ(parts[0].batch.block_tables, (std::vector<int32_t>{0, -1}));

  EXPECT_EQ(parts[1].first_token, 3);
  EXPECT_EQ(parts[1].first_logit_row, 0);
  EXPECT_EQ(parts[1].batch.token_ids, (std::vector<int32_t>{13, 14, 20, 30}));
  EXPECT_EQ(parts[1].batch.positions, (std::vector<int32_t>{3, 4, 7, 9}));
  EXPECT_EQ(parts[1].batch.slot_mapping, (std::vector<int32_t>{3, 4, 39, 73}));
  EXPECT_EQ(parts[1].batch.query_start, (std::vector<int32_t>{0, 2, 3, 4}));
  EXPECT_EQ(parts[1].batch.context_len, (std::vector<int32_t>{5, 8, 10}));
  EXPECT_EQ(parts[1].batch.block_tables, (std::vector<int32_t>{0, -1, 2, -1, 4, -1}));
  EXPECT_EQ(parts[1].batch.logits_rows, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(parts[1].batch.max_blocks, 2);
}

TEST(StepBatchSplit, NeverMorePartsThanTokens) {
  std::vector<StepBatchPart> parts;
  split_step_batch(three_sequences(), 8, &parts);
  ASSERT_EQ(parts.size(), 7u);
  // One token each; the chunk's second token sees the first in the cache.
  EXPECT_EQ(parts[1].batch.token_ids, (std::vector<int32_t>{11}));
  EXPECT_EQ(parts[1].batch.context_len, (std::vector<int32_t>{2}));
  EXPECT_EQ(parts[1].batch.query_start, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(parts[6].first_token, 6);
  EXPECT_EQ(parts[6].first_logit_row, 1);
  EXPECT_EQ(parts[6].batch.logits_rows, (std::vector<int32_t>{0}));
}

// Whatever the cut, the parts together are the batch: tokens in order, each sequence's pieces
// contiguous with the last piece's context the sequence's, and every piece's context at least
// its own tokens.
TEST(StepBatchSplit, PartsReassembleTheBatch) {
  StepBatch b;
  const std::vector<int32_t> lengths = {1, 37, 1, 1, 200, 3, 1, 64};
  int32_t t = 0;
  b.max_blocks = 1;
  b.query_start = {0};
  for (size_t s = 0; s < lengths.size(); ++s) {
    for (int32_t i = 0; i < lengths[s]; ++i) {
      b.token_ids.push_back(t);
      b.positions.push_back(100 + i);
      b.slot_mapping.push_back(t++);
    }
    b.query_start.push_back(t);
    b.context_len.push_back(100 + lengths[s]);
    b.block_tables.push_back(static_cast<int32_t>(s));
    b.logits_rows.push_back(t - 1);
  }
  std::vector<StepBatchPart> parts;
  for (int32_t count : {2, 3, 5, 16}) {
    SCOPED_TRACE(count);
    split_step_batch(b, count, &parts);
    ASSERT_EQ(parts.size(), static_cast<size_t>(count));
    std::vector<int32_t> tokens, logits;
    std::vector<int32_t> last_context(lengths.size(), 0);
    for (const StepBatchPart& p : parts) {
      EXPECT_EQ(p.first_token, static_cast<int32_t>(tokens.size()));
      EXPECT_EQ(p.first_logit_row, static_cast<int32_t>(logits.size()));
      EXPECT_GE(p.batch.num_tokens(), b.num_tokens() / count);
      EXPECT_LE(p.batch.num_tokens(), b.num_tokens() / count + 1);
      for (int32_t r : p.batch.logits_rows) logits.push_back(r + p.first_token);
      for (int32_t s = 0; s < p.batch.num_seqs(); ++s) {
        const int32_t q0 = p.batch.query_start[s], q1 = p.batch.query_start[s + 1];
        const int32_t seq = p.batch.block_tables[s];  // the test's block id is the sequence
        EXPECT_GE(p.batch.context_len[s], q1 - q0);
        // The piece's last token sits at the context's end: position = context - 1.
        EXPECT_EQ(p.batch.positions[q1 - 1], p.batch.context_len[s] - 1);
        EXPECT_GT(p.batch.context_len[s], last_context[seq]);
        last_context[seq] = p.batch.context_len[s];
        for (int32_t i = q0; i < q1; ++i) tokens.push_back(p.batch.token_ids[i]);
      }
    }
    EXPECT_EQ(tokens, b.token_ids);
    EXPECT_EQ(logits, b.logits_rows);
    for (size_t s = 0; s < lengths.size(); ++s) EXPECT_EQ(last_context[s], b.context_len[s]);
  }
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
