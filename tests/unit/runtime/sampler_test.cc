#include "runtime/sampler.h"

#include <cmath>
#include <map>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

int32_t draw(Sampler& s, std::vector<float> logits) { return s.sample(logits).token; }

TEST(Sampler, GreedyPicksArgmaxAndReportsLogprob) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  Sampler s(p, {});
  std::vector<float> l = logits_of({0.1f, 2.0f, -1.0f, 1.9f});
  const SampleResult r = s.sample(l);
  EXPECT_EQ(r.token, 1);
  const double lse = std::log(std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.9));
  EXPECT_NEAR(r.logprob, 2.0 - lse, 1e-5);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  p.has_seed = true;
  std::vector<float> base(50);
  for (int i = 0; i < 50; ++i) base[i] = std::sin(i * 0.7f);
  auto run = [&](uint64_t seed) {
    SamplingParams q = p;
    q.seed = seed;
    Sampler s(q, {});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(draw(s, base));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> l = logits_of({0.5f, 0.4f, 3.0f, 0.2f});
  SamplingParams k1;
  k1.top_k = 1;
  k1.seed = 1;
  k1.has_seed = true;
  Sampler a(k1, {});
  SamplingParams p;
  p.top_p = 1e-6f;
  p.seed = 2;
  p.has_seed = true;
  Sampler b(p, {});
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(draw(a, l), 2);
    EXPECT_EQ(draw(b, l), 2);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // probs ~ [0.64, 0.24, 0.09, 0.03]; min_p 0.3 keeps tokens with p >= 0.19: ids 0 and 1.
  std::vector<float> l = logits_of({2.0f, 1.0f, 0.0f, -1.0f});
  SamplingParams p;
  p.min_p = 0.3f;
  p.seed = 3;
  p.has_seed = true;
  Sampler s(p, {});
  std::map<int32_t, int> seen;
  for (int i = 0; i < 500; ++i) ++seen[draw(s, l)];
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
  EXPECT_EQ(seen.count(2) + seen.count(3), 0u);
}

TEST(Sampler, TemperatureSamplingFollowsSoftmax) {
  std::vector<float> l = logits_of({1.0f, 0.0f, -1.0f});
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 7;
  p.has_seed = true;
  Sampler s(p, {});
  std::vector<int> counts(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[draw(s, l)];
  const double z = std::exp(2.0) + 1.0 + std::exp(-2.0);
  const double expected[3] = {std::exp(2.0) / z, 1.0 / z, std::exp(-2.0) / z};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(counts[i] / double(n), expected[i], 0.015) << i;
}

TEST(Sampler, LogprobIsOfTheRawDistributionEvenWithPenalties) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.repetition_penalty = 100.0f;
  Sampler s(p, std::vector<int32_t>{0});
  std::vector<float> l = logits_of({3.0f, 1.0f});
  const SampleResult r = s.sample(l);
  EXPECT_EQ(r.token, 1);  // 3 / 100 < 1
  EXPECT_NEAR(r.logprob, 1.0 - std::log(std::exp(3.0) + std::exp(1.0)), 1e-5);
}

TEST(Sampler, RepetitionPenaltyCoversPromptAndOutput) {
  // Token 0 leads but is in the prompt; a penalty of 10 divides its logit below token 1's.
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 10.0f;
  Sampler s(p, std::vector<int32_t>{0});
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f, -5.0f})), 1);
  // Token 1 was just generated: now penalised too, and negative logits are multiplied.
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f, -5.0f})), 0);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputs) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  Sampler s(p, std::vector<int32_t>{1});  // prompt tokens are not penalised by these
  // After generating token 0 twice it loses 2 * 1.0 + 0.5 = 2.5.
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f})), 0);  // 3.0 vs 1.0
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f})), 0);  // 1.5 vs 1.0
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f})), 1);  // 0.5 vs 1.0
}

TEST(Sampler, TopLogprobsAreSortedAndNormalized) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler s(p, {});
  std::vector<float> l = logits_of({0.0f, 5.0f, 4.0f});
  const SampleResult r = s.sample(l);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_NEAR(std::exp(r.top[0].logprob) + std::exp(r.top[1].logprob) + std::exp(-5.0 + r.top[0].logprob),
              1.0, 1e-5);
}

}  // namespace
}  // namespace tessera
