#include "runtime/request/sampler.h"

#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

// Sampling's working buffers, shared by the tests as the engine shares one among its sequences.
SamplingScratch& scratch() {
  static SamplingScratch s;
  return s;
}

// The sequence's `counter`-th token (its output index).
int32_t draw(Sampler& s, std::vector<float> logits, uint64_t counter = 0) {
  return s.sample(logits, counter, scratch()).token;
}

TEST(Sampler, GreedyPicksArgmaxAndReportsLogprob) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  Sampler s(p, {});
  std::vector<float> l = logits_of({0.1f, 2.0f, -1.0f, 1.9f});
  const SampleResult r = s.sample(l, 0, scratch());
  EXPECT_EQ(r.token, 1);
  const double lse = std::log(std::exp(0.1) + std::exp(2.0) + std::exp(-1.0) + std::exp(1.9));
  EXPECT_NEAR(r.logprob, 2.0 - lse, 1e-5);
}

TEST(Sampler, NonFiniteLogitsGiveNoTokenEvenWithPenaltiesAndLogprobs) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.logprobs = true;
  p.repetition_penalty = 1.3f;
  const std::vector<int32_t> prompt = {5, 1};
  Sampler s(p, prompt);
  std::vector<float> l = logits_of({0.1f, std::numeric_limits<float>::quiet_NaN(), -1.0f, 1.9f,
                                    0.0f, 0.3f});
  EXPECT_EQ(s.sample(l, 0, scratch()).token, -1);
}

// A request's own penalties and biases, however extreme, order the tokens: they never turn finite
// logits into the non-finite ones of a broken model (which would fault the whole model).
TEST(Sampler, ExtremePenaltiesSaturateInsteadOfOverflowing) {
  const std::vector<int32_t> prompt = {3};
  {
    SamplingParams p;
    p.temperature = 0;
    p.repetition_penalty = 1e-38f;  // boosts the seen token 3 past the largest float
    Sampler s(p, prompt);
    EXPECT_EQ(draw(s, logits_of({0.1f, 2.0f, -1.0f, 1.9f})), 3);
  }
  {
    SamplingParams p;
    p.temperature = 0.7f;
    p.repetition_penalty = 1e-38f;
    Sampler s(p, prompt);
    EXPECT_EQ(draw(s, logits_of({0.1f, 2.0f, -1.0f, 1.9f})), 3);
  }
  {
    SamplingParams p;
    p.temperature = 0;
    p.frequency_penalty = 2.0f;
    p.logit_bias = {{1, -3e38f}, {2, 3e38f}, {0, 3e38f}};  // -inf and +inf once added up
    Sampler s(p, {});
    const int32_t t = draw(s, logits_of({1e38f, 2.0f, 1e38f, 1.9f}));
    EXPECT_TRUE(t == 0 || t == 2) << t;
  }
  // A logit that is not finite before the transforms still gives no token.
  SamplingParams p;
  p.repetition_penalty = 1e-38f;
  Sampler s(p, prompt);
  EXPECT_EQ(draw(s, logits_of({0.1f, std::numeric_limits<float>::infinity(), -1.0f, 1.9f})), -1);
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
    for (int i = 0; i < 64; ++i) out.push_back(draw(s, base, i));
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
    EXPECT_EQ(draw(a, l, i), 2);
    EXPECT_EQ(draw(b, l, i), 2);
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
  for (int i = 0; i < 500; ++i) ++seen[draw(s, l, i)];
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
  for (int i = 0; i < n; ++i) ++counts[draw(s, l, i)];
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
  const SampleResult r = s.sample(l, 0, scratch());
  EXPECT_EQ(r.token, 1);  // 3 / 100 < 1
  EXPECT_NEAR(r.logprob, 1.0 - std::log(std::exp(3.0) + std::exp(1.0)), 1e-5);
}

TEST(Sampler, RepetitionPenaltyCoversPromptAndOutput) {
  // Token 0 leads but is in the prompt; a penalty of 10 divides its logit below token 1's.
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 10.0f;
  Sampler s(p, std::vector<int32_t>{0});
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f, -5.0f}), 0), 1);
  // Token 1 was just generated: now penalised too, and negative logits are multiplied.
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f, -5.0f}), 1), 0);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputs) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 1.0f;
  p.presence_penalty = 0.5f;
  Sampler s(p, std::vector<int32_t>{1});  // prompt tokens are not penalised by these
  // After generating token 0 twice it loses 2 * 1.0 + 0.5 = 2.5.
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f}), 0), 0);  // 3.0 vs 1.0
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f}), 1), 0);  // 1.5 vs 1.0
  EXPECT_EQ(draw(s, logits_of({3.0f, 1.0f}), 2), 1);  // 0.5 vs 1.0
}

TEST(Sampler, TopLogprobsAreSortedAndNormalized) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 2;
  Sampler s(p, {});
  std::vector<float> l = logits_of({0.0f, 5.0f, 4.0f});
  const SampleResult r = s.sample(l, 0, scratch());
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_NEAR(std::exp(r.top[0].logprob) + std::exp(r.top[1].logprob) + std::exp(-5.0 + r.top[0].logprob),
              1.0, 1e-5);
}

// The host Sampler and the shared reference (which the backends' sample ops follow) pick the
// same token for the same (seed, counter), over random logits and mixed parameters.
TEST(Sampler, AgreesWithTheReferenceForEveryParameterMix) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(3000);
  for (float& l : logits) l = normal(rng);
  SamplingScratch scratch;
  int compared = 0;
  for (float temperature : {0.0f, 0.6f, 1.0f, 1.7f}) {
    for (int32_t top_k : {0, 1, 40}) {
      for (float top_p : {1.0f, 0.9f, 0.3f}) {
        for (float min_p : {0.0f, 0.05f}) {
          SamplingParams p;
          p.temperature = temperature;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          p.seed = 1000 + compared;
          p.has_seed = true;
          Sampler s(p, {});
          for (uint64_t c = 0; c < 8; ++c) {
            const std::optional<SamplingRow> row = s.plain_row(c);
            ASSERT_TRUE(row.has_value());
            // The row carries the request's parameters, so the device draws what the host does.
            EXPECT_EQ(row->seed, p.seed);
            EXPECT_EQ(row->counter, c);
            EXPECT_EQ(row->temperature, temperature);
            EXPECT_EQ(row->top_k, top_k);
            EXPECT_EQ(row->top_p, top_p);
            EXPECT_EQ(row->min_p, min_p);
            const int32_t want = sample_reference(logits, *row, scratch).token;
            EXPECT_EQ(draw(s, logits, c), want) << "T " << temperature << " k " << top_k
                                                << " p " << top_p << " min_p " << min_p;
            ++compared;
          }
        }
      }
    }
  }
}

TEST(Sampler, PenaltiesApplyBeforeTheSharedDraw) {
  // With penalties the Sampler's token is the reference's on the penalized logits.
  std::vector<float> logits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.seed = 5;
  p.has_seed = true;
  Sampler s(p, std::vector<int32_t>{0, 1});
  EXPECT_FALSE(s.plain_row(0).has_value());  // only the host can apply penalties
  const std::vector<float> penalized = {1.0f, 0.75f, 1.0f, 0.5f, 0.0f};
  SamplingRow row;
  row.seed = 5;
  SamplingScratch scratch;
  EXPECT_EQ(draw(s, logits, 0), sample_reference(penalized, row, scratch).token);
}

TEST(Sampler, LogprobsKeepARowOnTheHostAndUnseededRequestsDrawTheirOwnSeed) {
  SamplingParams lp;
  lp.logprobs = true;
  EXPECT_FALSE(Sampler(lp, {}).plain_row(0).has_value());
  SamplingParams top;
  top.top_logprobs = 2;
  EXPECT_FALSE(Sampler(top, {}).plain_row(0).has_value());
  SamplingParams unseeded;
  const Sampler a(unseeded, {}), b(unseeded, {});
  ASSERT_TRUE(a.plain_row(0).has_value());
  EXPECT_NE(a.plain_row(0)->seed, b.plain_row(0)->seed);  // 2^-64 odds of a false failure
  EXPECT_EQ(a.plain_row(0)->seed, a.plain_row(3)->seed);  // drawn once, kept
}

}  // namespace
}  // namespace tessera
