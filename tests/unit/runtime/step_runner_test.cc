// The StepRunner's contract with a family, on a family that does no neural work: it records each
// StagePass and marks the residual stream and logits so that the hops and the output can be
// followed. Two CPU "devices" make two pipeline stages.
#include "runtime/runner/step_runner.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "runtime/kv_cache/kv_cache.h"

namespace tessera {
namespace {

constexpr int32_t kLayers = 4;
constexpr int64_t kHidden = 8;
constexpr int64_t kVocab = 16;

struct SeenPass {
  int32_t stage;
  PassRows tokens;
  PassRows logits;
  bool residual_arrived;  // every row of the pass held what the stage before wrote
};

class RecordingFamily final : public StageModel {
 public:
  explicit RecordingFamily(std::vector<SeenPass>* seen) : seen_(seen) {}
  int32_t num_layers() const override { return kLayers; }
  int64_t hidden_size() const override { return kHidden; }
  int64_t vocab_size() const override { return kVocab; }
  absl::Status allocate_activations(int32_t stage, const LayerSegment&, int64_t rows,
                                    int64_t logit_rows, bool last) override {
    allocated.push_back({stage, rows, last ? logit_rows : 0});
    return absl::OkStatus();
  }
  void run_stage(const StagePass& p) override {
    bool arrived = true;
    float* residual = p.residual.as<float>();
    for (int64_t r = p.tokens.first; r < p.tokens.first + p.tokens.count; ++r) {
      if (!p.first_stage) arrived &= residual[r * kHidden] == 1000.0f + static_cast<float>(r);
      residual[r * kHidden] = 1000.0f + static_cast<float>(r);
    }
    seen_->push_back({p.stage, p.tokens, p.logits, arrived});
    if (!p.last_stage) return;
    float* logits = p.logit_out.as<float>();
    for (int64_t r = p.logits.first; r < p.logits.first + p.logits.count; ++r) {
      for (int64_t v = 0; v < kVocab; ++v) logits[r * kVocab + v] = static_cast<float>(r * 100 + v);
    }
  }

  struct Allocation {
    int32_t stage;
    int64_t rows;
    int64_t logit_rows;
  };
  std::vector<Allocation> allocated;

 private:
  std::vector<SeenPass>* seen_;
};

// `n_prefill` tokens of one prompt (its last one sampled), then `n_decode` decode sequences.
StepBatch batch_of(int32_t n_prefill, int32_t n_decode) {
  StepBatch b;
  b.max_blocks = 64;
  b.query_start = {0};
  auto add_seq = [&](int32_t tokens, int32_t context) {
    for (int32_t t = 0; t < tokens; ++t) {
      b.token_ids.push_back(t % static_cast<int32_t>(kVocab));
      b.positions.push_back(context - tokens + t);
      b.slot_mapping.push_back(-1);
    }
    b.query_start.push_back(b.num_tokens());
    b.context_len.push_back(context);
    b.logits_rows.push_back(b.num_tokens() - 1);
    for (int32_t k = 0; k < b.max_blocks; ++k) b.block_tables.push_back(-1);
  };
  if (n_prefill > 0) add_seq(n_prefill, n_prefill);
  for (int32_t s = 0; s < n_decode; ++s) add_seq(1, 10);
  return b;
}

class StepRunnerTest : public ::testing::Test {
 protected:
  // The runner over `stages` CPU backends splitting kLayers evenly.
  std::unique_ptr<StepRunner> make(int stages, ExecutionOptions execution,
                                   ForwardLimits limits = {1024, 64}) {
    std::vector<LayerSegment> segments;
    for (int s = 0; s < stages; ++s) {
      backends_.push_back(std::make_unique<CpuBackend>(1, s));
      segments.push_back({backends_.back().get(), s * kLayers / stages, kLayers / stages});
    }
    auto family = std::make_unique<RecordingFamily>(&seen_);
    family_ = family.get();
    absl::StatusOr<std::unique_ptr<StepRunner>> runner =
        StepRunner::create(std::move(family), segments, limits, std::move(execution));
    EXPECT_TRUE(runner.ok()) << runner.status();
    absl::StatusOr<std::unique_ptr<KvCache>> cache =
        KvCache::create(segments, KvCacheShape{kLayers, 4, 16, 1, 1});
    EXPECT_TRUE(cache.ok()) << cache.status();
    cache_ = *std::move(cache);
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<SeenPass> seen_;
  RecordingFamily* family_ = nullptr;
  std::unique_ptr<KvCache> cache_;
};

ExecutionOptions direct() {
  ExecutionOptions e;
  e.decode_graphs = DecodeGraphs::kOff;
  return e;
}

// A large step over two stages runs as two micro-batches, each through stage 0 then stage 1 in
// order; the residual stream of each part's rows arrives at stage 1 as stage 0 left it, and the
// logits come back row by row in the batch's order.
TEST_F(StepRunnerTest, MicroBatchesRunEveryStageInOrderAndTheResidualHops) {
  ExecutionOptions e = direct();
  e.micro_batches = 2;
  e.min_micro_batch_tokens = 256;
  std::unique_ptr<StepRunner> runner = make(2, e);
  ASSERT_NE(runner, nullptr);
  const StepBatch batch = batch_of(600, 3);  // 603 tokens, 4 logit rows
  std::vector<float> logits(4 * kVocab, -1.0f);
  ASSERT_TRUE(runner->forward(batch, *cache_, logits).ok());

  ASSERT_EQ(seen_.size(), 4u);
  const int32_t stages[] = {0, 1, 0, 1};
  for (size_t i = 0; i < seen_.size(); ++i) {
    EXPECT_EQ(seen_[i].stage, stages[i]);
    EXPECT_TRUE(seen_[i].residual_arrived) << "pass " << i;
    EXPECT_EQ(seen_[i].tokens.gemm, seen_[i].tokens.count);  // no buckets: no padding
  }
  EXPECT_EQ(seen_[0].tokens.first, 0);
  EXPECT_EQ(seen_[2].tokens.first, seen_[0].tokens.count);
  EXPECT_EQ(seen_[0].tokens.count + seen_[2].tokens.count, 603);
  EXPECT_EQ(seen_[0].logits.count, 0);  // stage 0 is not the last
  EXPECT_EQ(seen_[1].logits.count + seen_[3].logits.count, 4);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t v = 0; v < kVocab; ++v) EXPECT_EQ(logits[r * kVocab + v], r * 100 + v);
  }
  EXPECT_EQ(runner->micro_batched_steps(), 1);
}

// With GEMM buckets, a pass's GEMMs run over its rows padded to the bucket (prefill: a multiple
// of prefill_pad; logit rows: the decode bucket), and the activations hold the padding.
TEST_F(StepRunnerTest, GemmRowsArePaddedToTheBuckets) {
  ExecutionOptions e = direct();
  e.gemm_buckets = TokenBuckets{};
  std::unique_ptr<StepRunner> runner = make(1, e);
  ASSERT_NE(runner, nullptr);
  const StepBatch batch = batch_of(100, 2);  // 102 tokens, 3 logit rows
  std::vector<float> logits(3 * kVocab);
  ASSERT_TRUE(runner->forward(batch, *cache_, logits).ok());
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].tokens.count, 102);
  EXPECT_EQ(seen_[0].tokens.gemm, 128);  // 102 rounded up to prefill_pad 64
  EXPECT_EQ(seen_[0].logits.count, 3);
  EXPECT_EQ(seen_[0].logits.gemm, 4);  // decode bucket of 3
  const StepCapacity cap = StepRunner::capacity({1024, 64}, e);
  ASSERT_EQ(family_->allocated.size(), 1u);
  EXPECT_EQ(family_->allocated[0].rows, cap.tokens);
  EXPECT_GE(cap.tokens, 1024 + 63 - 1);
  EXPECT_EQ(family_->allocated[0].logit_rows, cap.logit_rows);
}

// A decode step within the largest graph bucket runs padded to its bucket as a graph step (on
// the CPU the recorded ops run directly); only the real rows' logits come back.
TEST_F(StepRunnerTest, DecodeStepsRunPaddedToTheirGraphBucket) {
  ExecutionOptions e;
  e.decode_graphs = DecodeGraphs::kAlways;
  std::unique_ptr<StepRunner> runner = make(1, e);
  ASSERT_NE(runner, nullptr);
  EXPECT_EQ(runner->largest_graph_bucket(), 64);  // the defaults' largest within 64 rows
  const StepBatch batch = batch_of(0, 3);
  std::vector<float> logits(3 * kVocab, -1.0f);
  ASSERT_TRUE(runner->forward(batch, *cache_, logits).ok());
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].tokens.count, 4);
  EXPECT_EQ(seen_[0].logits.count, 4);
  EXPECT_EQ(runner->graph_steps(), 1);
  for (int64_t v = 0; v < kVocab; ++v) EXPECT_EQ(logits[2 * kVocab + v], 200 + v);
}

// The caller's overlapped work runs once per step and is not run again by the next one: before
// the stages of a step queued kernel by kernel (a prefill here), after those of a decode graph
// step (whose queuing is quick; on the CPU the recorded ops run directly).
TEST_F(StepRunnerTest, OverlappedWorkRunsOnceWithTheStep) {
  ExecutionOptions e;
  e.decode_graphs = DecodeGraphs::kAlways;
  std::unique_ptr<StepRunner> runner = make(1, e);
  ASSERT_NE(runner, nullptr);
  EXPECT_FALSE(runner->overlaps_host_work()) << "the CPU backend computes on the calling thread";
  for (const bool decode : {false, true}) {
    SCOPED_TRACE(decode ? "decode graph step" : "prefill step");
    seen_.clear();
    const StepBatch batch = decode ? batch_of(0, 3) : batch_of(5, 1);
    std::vector<float> logits(batch.logits_rows.size() * kVocab);
    size_t stages_seen = 99;
    int ran = 0;
    runner->overlap_next_step([&] {
      stages_seen = seen_.size();
      ++ran;
    });
    ASSERT_TRUE(runner->forward(batch, *cache_, logits).ok());
    EXPECT_EQ(ran, 1);
    EXPECT_EQ(stages_seen, decode ? 1u : 0u);
    EXPECT_FALSE(runner->take_overlapped_work()) << "taken by the step";
    ASSERT_TRUE(runner->forward(batch, *cache_, logits).ok());
    EXPECT_EQ(ran, 1);
  }
  EXPECT_EQ(runner->graph_steps(), 2);
}

// Sampling on the device hands back only tokens: the family's logits sampled greedily.
TEST_F(StepRunnerTest, ForwardSampledReturnsTheTokens) {
  std::unique_ptr<StepRunner> runner = make(1, direct());
  ASSERT_NE(runner, nullptr);
  const StepBatch batch = batch_of(5, 1);
  const std::vector<SamplingRow> rows(2, SamplingRow{.temperature = 0.0f});  // argmax
  std::vector<int32_t> tokens(2, -1);
  ASSERT_TRUE(runner->forward_sampled(batch, *cache_, rows, tokens).ok());
  EXPECT_EQ(tokens, (std::vector<int32_t>{kVocab - 1, kVocab - 1}));
}

TEST_F(StepRunnerTest, RefusesSegmentsThatDoNotCoverTheFamilysLayers) {
  CpuBackend backend(1);
  std::vector<SeenPass> seen;
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::create(
      std::make_unique<RecordingFamily>(&seen), {LayerSegment{&backend, 0, kLayers - 1}},
      ForwardLimits{}, direct());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StepRunnerTest, RefusesNonPositiveLimits) {
  CpuBackend backend(1);
  std::vector<SeenPass> seen;
  absl::StatusOr<std::unique_ptr<StepRunner>> runner = StepRunner::create(
      std::make_unique<RecordingFamily>(&seen), {LayerSegment{&backend, 0, kLayers}},
      ForwardLimits{0, 8}, direct());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("max_batch_tokens"), std::string_view::npos);
}

}  // namespace
}  // namespace tessera
