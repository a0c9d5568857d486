// runtime/perplexity: the sliding-window perplexity against figures known in closed form (uniform
// logits give the vocabulary size; a model that gives the right token a known probability gives its
// inverse), each token scored once whatever the window, stride and chunk sizes, the KV cache read
// across chunks and reset per window, and every refusal naming what was wrong.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace tessera {
namespace {

constexpr int64_t kVocab = 50;

// Writes each token into its KV slot and, for each logits row, reads the row's context back
// through the block table: the next token is predicted to be (sum of the context's ids + 1) mod
// the vocabulary, with logit `confident` (0 everywhere else). A wrong slot, block table or chunk
// boundary changes what is predicted. `uniform`: every logit 0.
class ContextModel final : public ForwardModel {
 public:
  ContextModel(ForwardLimits limits, float confident) : limits_(limits), confident_(confident) {}
  int64_t vocab_size() const override { return kVocab; }
  const ForwardLimits& limits() const override { return limits_; }
  absl::Status forward(const StepBatch& batch, const KvCache& cache,
                       std::span<float> logits) override {
    EXPECT_LE(batch.num_tokens(), limits_.max_batch_tokens);
    EXPECT_LE(static_cast<int32_t>(batch.logits_rows.size()), limits_.max_logit_rows);
    float* k = cache.layer(0).k.as<float>();
    const int32_t bs = cache.block_size();
    for (int32_t t = 0; t < batch.num_tokens(); ++t) {
      k[batch.slot_mapping[t]] = static_cast<float>(batch.token_ids[t]);
    }
    std::fill(logits.begin(), logits.end(), 0.0f);
    for (size_t r = 0; r < batch.logits_rows.size(); ++r) {
      const int32_t pos = batch.positions[batch.logits_rows[r]];
      int64_t sum = 0;
      for (int32_t p = 0; p <= pos; ++p) {
        sum += static_cast<int64_t>(k[batch.block_tables[p / bs] * bs + p % bs]);
      }
      logits[r * kVocab + (sum + 1) % kVocab] = confident_;
    }
    return absl::OkStatus();
  }

 private:
  ForwardLimits limits_;
  float confident_;
};

class PerplexityTest : public testing::Test {
 protected:
  PerplexityTest() : cache_(*KvCache::create(backend_, KvCacheShape{1, 64, 4, 1, 1})) {}
  CpuBackend backend_{1};
  std::unique_ptr<KvCache> cache_;
};

// ids whose every next token is what ContextModel predicts within a window starting at `begin`.
std::vector<int32_t> predictable(int32_t n) {
  std::vector<int32_t> ids = {3};
  int64_t sum = 3;
  while (static_cast<int32_t>(ids.size()) < n) {
    const int32_t next = static_cast<int32_t>((sum + 1) % kVocab);
    ids.push_back(next);
    sum += next;
  }
  return ids;
}

TEST_F(PerplexityTest, UniformLogitsGiveTheVocabularySize) {
  ContextModel model({16, 16}, 0.0f);
  std::vector<int32_t> ids(100);
  std::iota(ids.begin(), ids.end(), 0);
  for (int32_t& id : ids) id %= kVocab;
  auto r = perplexity(model, *cache_, ids, {16, 8});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tokens, 100);
  EXPECT_EQ(r->scored, 99);
  EXPECT_EQ(r->windows, 12);  // starts 0, 8, ..., 88 (the one ending at the text's end)
  EXPECT_NEAR(r->perplexity(), static_cast<double>(kVocab), 1e-9 * kVocab);
  EXPECT_EQ(cache_->allocator().num_free(), 64);  // every window's blocks returned
}

TEST_F(PerplexityTest, AKnownProbabilityGivesItsInverse) {
  // One window over the whole text: every token is the predicted one, p = e^c / (e^c + V - 1).
  const float c = 3.0f;
  ContextModel model({7, 5}, c);  // chunks of 5 tokens: the context crosses chunk boundaries
  const std::vector<int32_t> ids = predictable(40);
  auto r = perplexity(model, *cache_, ids, {64, 64});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->scored, 39);
  const double e = std::exp(static_cast<double>(c)), p = e / (e + kVocab - 1);
  EXPECT_NEAR(r->perplexity(), 1.0 / p, 1e-9);
}

TEST_F(PerplexityTest, WindowsRestartTheContextAndScoreEachTokenOnce) {
  // The same text in windows of 16 every 8: a later window's context starts at its first token,
  // so the predictable sequence (built from position 0) is mispredicted there -- the score must
  // differ from one window, and not depend on the chunk size.
  const std::vector<int32_t> ids = predictable(60);
  ContextModel whole({64, 64}, 3.0f), chunked({3, 3}, 3.0f);
  auto one = perplexity(whole, *cache_, ids, {64, 64});
  auto a = perplexity(whole, *cache_, ids, {16, 8});
  auto b = perplexity(chunked, *cache_, ids, {16, 8});
  ASSERT_TRUE(one.ok() && a.ok() && b.ok());
  EXPECT_EQ(a->scored, 59);
  EXPECT_EQ(a->total_nll, b->total_nll);  // chunking changes nothing, bit for bit
  EXPECT_GT(a->perplexity(), one->perplexity() * 1.5);
  // Windows that do not overlap: a window's first token has no row before it.
  auto c = perplexity(whole, *cache_, ids, {16, 16});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->windows, 4);
  EXPECT_EQ(c->scored, 59 - 3);
}

TEST_F(PerplexityTest, RefusalsNameWhatWasWrong) {
  ContextModel model({16, 16}, 1.0f);
  const std::vector<int32_t> one = {1}, bad = {1, 2, kVocab}, ok = {1, 2, 3};
  auto expect = [](const absl::StatusOr<PerplexityResult>& r, const std::string& what) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find(what), std::string::npos) << r.status();
  };
  expect(perplexity(model, *cache_, one, {16, 8}), "at least 2 tokens");
  expect(perplexity(model, *cache_, bad, {16, 8}), "token 2 is id 50, outside the vocabulary");
  expect(perplexity(model, *cache_, ok, {1, 1}), "context 1 and stride 1");
  expect(perplexity(model, *cache_, ok, {16, 0}), "stride 0");
  expect(perplexity(model, *cache_, ok, {16, 17}), "stride 17");
  // 64 blocks of 4 tokens: a window of 300 does not fit.
  std::vector<int32_t> long_text(300, 1);
  expect(perplexity(model, *cache_, long_text, {300, 300}),
         "a window of 300 tokens does not fit the KV cache");
  EXPECT_EQ(cache_->allocator().num_free(), 64);
}

}  // namespace
}  // namespace tessera
