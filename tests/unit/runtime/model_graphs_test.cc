// Decode steps through the graph path (runtime/runner/graph_step.h): padded to their bucket and run by
// Backend::run_graph. The CPU backend runs the ops directly, so with DecodeGraphs::kAlways these
// tests check everything but the recording itself (the GPU kernel tests check that): padding
// rows must not change a real token, on one device or split over two.
#include <gtest/gtest.h>

#include "runtime/runner/graph_step.h"
#include "tests/unit/runtime/default_model_fixture.h"

namespace tessera {
namespace {

const std::vector<std::string> kPrompts = {
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "def quicksort(arr):",
    "The three primary colors are",
    "Water boils at",
    "My favourite book is",
};

class ModelGraphs : public DefaultModel {
 protected:
  static InstanceOptions options(DecodeGraphs graphs) {
    InstanceOptions o = small_options(64);
    o.execution.decode_graphs = graphs;
    return o;
  }
};

TEST_F(ModelGraphs, AutoIsOffWhereTheBackendRunsOpsDirectly) {
  auto m = load(options(DecodeGraphs::kAuto));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->runner().largest_graph_bucket(), 0);
}

TEST_F(ModelGraphs, PaddedDecodeStepsGiveTheSameTokens) {
  auto direct = load(options(DecodeGraphs::kOff));
  auto graphed = load(options(DecodeGraphs::kAlways));
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(graphed, nullptr);
  // max_logit_rows 8: buckets 1, 2, 4, 8.
  EXPECT_EQ(graphed->runner().largest_graph_bucket(), 8);
  // 5 sequences (bucket 8, 3 padding rows), 3 (bucket 4, 1), 1 (bucket 1).
  for (size_t n : {5u, 3u, 1u}) {
    SCOPED_TRACE(n);
    const std::vector<std::string> prompts(kPrompts.begin(), kPrompts.begin() + n);
    EXPECT_EQ(generate(*graphed, prompts, 8), generate(*direct, prompts, 8));
  }
  // Every decode step went through the graph path, and the engine reports them for the metrics.
  EXPECT_GE(graphed->runner().graph_steps(), 7);  // at least the single prompt's 7
  EXPECT_EQ(graphed->engine().stats().graph_steps_total.load(), graphed->runner().graph_steps());
  EXPECT_EQ(direct->runner().graph_steps(), 0);
}

TEST_F(ModelGraphs, ContextsPastTheFirstClass) {
  // A prompt longer than kMinGraphContext: its decode steps run under the next context class
  // (a wider block table), beside a short one under the same key.
  std::string long_prompt;
  while (long_prompt.size() < 4 * 600) long_prompt += "The quick brown fox jumps over the lazy dog. ";
  const std::vector<std::string> prompts = {long_prompt, "def quicksort(arr):"};
  InstanceOptions o = options(DecodeGraphs::kOff);
  o.limits.max_batch_tokens = 256;
  auto direct = load(o);
  o.execution.decode_graphs = DecodeGraphs::kAlways;
  auto graphed = load(o);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(graphed, nullptr);
  ASSERT_GT(graphed->tokenizer().encode(long_prompt)->size(), static_cast<size_t>(kMinGraphContext));
  EXPECT_EQ(generate(*graphed, prompts, 4), generate(*direct, prompts, 4));
}

TEST_F(ModelGraphs, SplitOverTwoDevices) {
  InstanceOptions o = options(DecodeGraphs::kAlways);
  o.backend.devices = {0, 1};
  auto graphed = load(o);
  auto direct = load(options(DecodeGraphs::kOff));
  ASSERT_NE(graphed, nullptr);
  ASSERT_NE(direct, nullptr);
  const std::vector<std::string> prompts(kPrompts.begin(), kPrompts.begin() + 3);
  EXPECT_EQ(generate(*graphed, prompts, 8), generate(*direct, prompts, 8));
}

TEST_F(ModelGraphs, MicroBatchesSplitPrefillStepsAndGraphsRunDecodeSteps) {
  // With micro-batches of at least 8 tokens, the prompts' steps are split and the 2-token decode
  // steps run whole, as graphs.
  InstanceOptions o = options(DecodeGraphs::kAlways);
  o.backend.devices = {0, 1};
  o.execution.micro_batches = 2;
  o.execution.min_micro_batch_tokens = 8;
  auto m = load(o);
  auto direct = load(options(DecodeGraphs::kOff));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(direct, nullptr);
  EXPECT_EQ(m->runner().largest_graph_bucket(), 8);
  const std::vector<std::string> prompts = {kPrompts[0], kPrompts[1]};
  EXPECT_EQ(generate(*m, prompts, 6), generate(*direct, prompts, 6));
  EXPECT_GT(m->runner().micro_batched_steps(), 0);
  EXPECT_GE(m->runner().graph_steps(), 5);
}

}  // namespace
}  // namespace tessera
