// The shared sampling math (runtime/backend/sampling_math.h): greedy ties, thresholds with ties, the
// counter-based draw, and that the draws follow the filtered distribution (chi-square).
#include "runtime/backend/sampling_math.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

int32_t token(const std::vector<float>& logits, const SamplingRow& row) {
  SamplingScratch scratch;
  return sample_reference(logits, row, scratch).token;
}

// How often each token is drawn over counters 0..n-1.
std::map<int32_t, int> histogram(const std::vector<float>& logits, SamplingRow row, int n) {
  SamplingScratch scratch;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    row.counter = static_cast<uint64_t>(i);
    ++counts[sample_reference(logits, row, scratch).token];
  }
  return counts;
}

// Pearson's chi-square of `counts` against `probs` (tokens with probability 0 must not appear:
// they make the statistic infinite).
double chi_square(const std::map<int32_t, int>& counts, const std::vector<double>& probs, int n) {
  double chi = 0.0;
  for (size_t t = 0; t < probs.size(); ++t) {
    const auto it = counts.find(static_cast<int32_t>(t));
    const double seen = it == counts.end() ? 0.0 : it->second;
    if (probs[t] == 0.0) {
      if (seen > 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double want = probs[t] * n;
    chi += (seen - want) * (seen - want) / want;
  }
  return chi;
}

// softmax(logits / temperature) restricted to `kept`, renormalized.
std::vector<double> filtered_softmax(const std::vector<float>& logits, float temperature,
                                     const std::set<int32_t>& kept) {
  std::vector<double> p(logits.size(), 0.0);
  double z = 0.0;
  for (int32_t t : kept) z += p[t] = std::exp(logits[t] / static_cast<double>(temperature));
  for (double& v : p) v /= z;
  return p;
}

SamplingRow sampled(float temperature, uint64_t seed = 1) {
  SamplingRow row;
  row.temperature = temperature;
  row.seed = seed;
  return row;
}

TEST(SamplingMath, NonFiniteLogitsGiveNoToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::vector<float>& logits : {std::vector<float>{1.0f, nan, 2.0f},
                                           std::vector<float>{nan, 1.0f},
                                           std::vector<float>{1.0f, inf, 0.0f},
                                           std::vector<float>{-inf, 0.5f}}) {
    EXPECT_EQ(token(logits, sampled(0.0f)), -1);
    EXPECT_EQ(token(logits, sampled(0.8f)), -1);
  }
}

TEST(SamplingMath, GreedyTakesTheLowestIndexAmongEqualMaxima) {
  const std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 2.9f};
  SamplingRow row = sampled(0.0f);
  for (uint64_t c = 0; c < 10; ++c) {
    row.counter = c;
    EXPECT_EQ(token(logits, row), 1);
  }
  // Greedy ignores the filters and the draw.
  row.top_k = 1;
  row.top_p = 0.1f;
  row.min_p = 0.9f;
  EXPECT_EQ(token(logits, row), 1);
}

TEST(SamplingMath, TopKKeepsEveryTokenTiedAtTheThreshold) {
  // k = 2: the 2nd largest logit is 4, and all three 4s stay; the 1 goes.
  const std::vector<float> logits = {5.0f, 4.0f, 1.0f, 4.0f, 4.0f};
  SamplingRow row = sampled(1.0f);
  row.top_k = 2;
  const int n = 20000;
  const auto counts = histogram(logits, row, n);
  const std::vector<double> p = filtered_softmax(logits, 1.0f, {0, 1, 3, 4});
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_LT(chi_square(counts, p, n), 16.27);  // 3 degrees of freedom, p = 0.001
}

TEST(SamplingMath, TopPKeepsTheSmallestSetReachingTheMass) {
  // probs 0.5, 0.3, 0.15, 0.05 (as logits log p).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingRow row = sampled(1.0f);
  row.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: tokens 0 and 1
  const int n = 20000;
  auto counts = histogram(logits, row, n);
  EXPECT_EQ(counts.count(2) + counts.count(3), 0u);
  EXPECT_LT(chi_square(counts, filtered_softmax(logits, 1.0f, {0, 1}), n), 10.83);  // 1 dof
  row.top_p = 0.85f;  // 0.8 < 0.85 <= 0.95: tokens 0, 1 and 2
  counts = histogram(logits, row, n);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_LT(chi_square(counts, filtered_softmax(logits, 1.0f, {0, 1, 2}), n), 13.82);  // 2 dof
}

TEST(SamplingMath, TopPThresholdKeepsTiesWhateverTheirOrder) {
  // probs 0.4, 0.2, 0.2, 0.2: top_p 0.5 is reached by 0.4 plus either 0.2; a threshold keeps
  // all three tied tokens rather than whichever a sort happens to put first.
  const std::vector<float> logits = {std::log(0.4f), std::log(0.2f), std::log(0.2f),
                                     std::log(0.2f)};
  SamplingRow row = sampled(1.0f);
  row.top_p = 0.5f;
  const int n = 20000;
  const auto counts = histogram(logits, row, n);
  EXPECT_LT(chi_square(counts, filtered_softmax(logits, 1.0f, {0, 1, 2, 3}), n), 16.27);
  // A tiny top_p keeps only the most likely logit's tokens.
  row.top_p = 1e-6f;
  EXPECT_EQ(histogram(logits, row, 200), (std::map<int32_t, int>{{0, 200}}));
}

TEST(SamplingMath, MinPDropsTokensBelowAFractionOfTheMostLikely) {
  // w = 1, e^-1 = 0.37, e^-2 = 0.14, e^-3 = 0.05; min_p 0.3 keeps tokens 0 and 1.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  SamplingRow row = sampled(1.0f);
  row.min_p = 0.3f;
  const int n = 20000;
  const auto counts = histogram(logits, row, n);
  EXPECT_EQ(counts.count(2) + counts.count(3), 0u);
  EXPECT_LT(chi_square(counts, filtered_softmax(logits, 1.0f, {0, 1}), n), 10.83);
  // min-p is relative to the most likely token at the temperature: at T = 4, w = e^-0.25k.
  row.temperature = 4.0f;
  const auto hot = histogram(logits, row, n);
  EXPECT_EQ(hot.size(), 4u);
  EXPECT_LT(chi_square(hot, filtered_softmax(logits, 4.0f, {0, 1, 2, 3}), n), 16.27);
}

TEST(SamplingMath, DrawsFollowSoftmaxAtTheTemperature) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(12);
  for (float& l : logits) l = normal(rng);
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    const int n = 40000;
    const auto counts = histogram(logits, sampled(temperature, 99), n);
    std::set<int32_t> all;
    for (int32_t t = 0; t < 12; ++t) all.insert(t);
    // 11 degrees of freedom, p = 0.001: 31.26.
    EXPECT_LT(chi_square(counts, filtered_softmax(logits, temperature, all), n), 31.26)
        << "temperature " << temperature;
  }
}

TEST(SamplingMath, FiltersComposeInOrder) {
  // top-k 5 of 8, then min-p, then top-p over what is left, all at temperature 0.7.
  const std::vector<float> logits = {0.3f, 2.0f, -1.0f, 1.6f, 1.5f, 0.9f, 1.2f, -3.0f};
  SamplingRow row = sampled(0.7f, 1234);
  row.top_k = 5;      // keeps 1, 3, 4, 6, 5 (logits 2.0, 1.6, 1.5, 1.2, 0.9)
  row.min_p = 0.25f;  // w(0.9) = exp(-1.1 / 0.7) = 0.21 goes; w(1.2) = 0.32 stays
  row.top_p = 0.8f;   // of {1, 3, 4, 6}: masses 1, .565, .489, .319 (sum 2.37); 0.8 * sum =
                      // 1.90 needs 1 + .565 + .489 = 2.05: token 6 goes
  const int n = 30000;
  const auto counts = histogram(logits, row, n);
  EXPECT_LT(chi_square(counts, filtered_softmax(logits, 0.7f, {1, 3, 4}), n), 13.82);
}

TEST(SamplingMath, SameSeedAndCounterGiveTheSameToken) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i) * 0.37f);
  SamplingRow row = sampled(1.0f, 77);
  std::vector<int32_t> first, again, other_seed;
  for (uint64_t c = 0; c < 200; ++c) {
    row.counter = c;
    first.push_back(token(logits, row));
    again.push_back(token(logits, row));
    SamplingRow other = row;
    other.seed = 78;
    other_seed.push_back(token(logits, other));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other_seed);
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 100u);  // counters differ
  EXPECT_EQ(sampling_draw_bits(77, 5), sampling_draw_bits(77, 5));
  EXPECT_NE(sampling_draw_bits(77, 5), sampling_draw_bits(77, 6));
}

TEST(SamplingMath, DrawPointIsExactFloorOfUTimesMass) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng() >> 40);
    const uint64_t mass = rng() >> (1 + i % 40);  // below 2^63
    const unsigned __int128 exact = (static_cast<unsigned __int128>(bits) * mass) >> 24;
    ASSERT_EQ(sampling_draw_point(bits, mass), static_cast<uint64_t>(exact)) << bits << " " << mass;
  }
}

TEST(SamplingMath, LogitKeysKeepTheOrderOfFloats) {
  const std::vector<float> sorted = {-std::numeric_limits<float>::infinity(), -1e30f, -2.5f,
                                     -1e-30f, -0.0f, 0.0f, 1e-30f, 0.5f, 3.0f, 1e30f,
                                     std::numeric_limits<float>::infinity()};
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] == 0.0f && sorted[i - 1] == 0.0f) {
      EXPECT_EQ(sampling_logit_key(sorted[i - 1]), sampling_logit_key(sorted[i]));  // -0 == +0
    } else {
      EXPECT_LT(sampling_logit_key(sorted[i - 1]), sampling_logit_key(sorted[i])) << sorted[i];
    }
  }
}

TEST(SamplingMath, MarginIsSmallOnlyNearABoundary) {
  // Two equally likely tokens: the draw point sits at u * 2^41; u near 1/2 is near the boundary
  // between them, so some counter lands close and most do not.
  const std::vector<float> logits = {0.0f, 0.0f};
  SamplingScratch scratch;
  SamplingRow row = sampled(1.0f, 11);
  double smallest = 1.0;
  int far = 0;
  for (uint64_t c = 0; c < 2000; ++c) {
    row.counter = c;
    const SamplingOutcome o = sample_reference(logits, row, scratch);
    const double u = sampling_uniform(row.seed, c);
    EXPECT_NEAR(o.margin, std::min({u, std::abs(u - 0.5), 1.0 - u}), 1e-6) << c;
    smallest = std::min(smallest, o.margin);
    far += o.margin > 0.01;
  }
  EXPECT_LT(smallest, 0.005);
  EXPECT_GT(far, 1800);
  EXPECT_EQ(sample_reference(logits, sampled(0.0f), scratch).margin,
            std::numeric_limits<double>::infinity());
}

// The normalizer of logprobs and perplexity: stable at logits far past exp()'s range, -inf
// entries contributing nothing, an empty or all -inf row -inf.
TEST(LogSumExp, StableWithHugeAndMinusInfinityLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {1000.0f, 1000.0f, -inf, 999.0f};
  EXPECT_NEAR(log_sum_exp(row.data(), row.size()), 1000.0 + std::log(2.0 + std::exp(-1.0)), 1e-9);
  const std::vector<float> dead = {-inf, -inf};
  EXPECT_EQ(log_sum_exp(dead.data(), dead.size()), -inf);
  EXPECT_EQ(log_sum_exp(nullptr, 0), -inf);
}

}  // namespace
}  // namespace tessera
