// OpenAI's logit_bias on the host sampler: added to the logits before the shared sampling math,
// never to the logprobs, and a request with a bias is never sampled on the device (whose sample
// op has no bias).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/request/sampler.h"

namespace tessera {
namespace {

SamplingParams greedy_with(std::vector<std::pair<int32_t, float>> bias) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = std::move(bias);
  return p;
}

TEST(LogitBias, ForcesAndBansTokensUnderGreedy) {
  const std::vector<float> logits = {1.0f, 4.0f, 2.0f, 3.0f};  // argmax 1, then 3
  SamplingScratch scratch;
  auto sample = [&](SamplingParams p) {
    Sampler s(p, std::vector<int32_t>{});
    std::vector<float> row = logits;
    return s.sample(row, 0, scratch).token;
  };
  EXPECT_EQ(sample(greedy_with({})), 1);
  EXPECT_EQ(sample(greedy_with({{0, 100.0f}})), 0);     // forced
  EXPECT_EQ(sample(greedy_with({{1, -100.0f}})), 3);    // banned: the next best
  EXPECT_EQ(sample(greedy_with({{2, 2.5f}, {3, -2.0f}})), 2);  // 2 + 2.5 > 4
}

TEST(LogitBias, LogprobsStayTheModelsAndTheDeviceDoesNotSample) {
  SamplingParams p = greedy_with({{0, 100.0f}});
  p.logprobs = true;
  Sampler biased(p, std::vector<int32_t>{});
  EXPECT_FALSE(biased.plain_row(0).has_value());
  SamplingParams plain_params = greedy_with({});
  EXPECT_TRUE(Sampler(plain_params, std::vector<int32_t>{}).plain_row(0).has_value());

  SamplingScratch scratch;
  std::vector<float> row = {0.0f, 0.0f};  // two equally likely tokens: logprob ln(1/2) each
  const SampleResult r = biased.sample(row, 0, scratch);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, -0.6931472f, 1e-5f);
}

}  // namespace
}  // namespace tessera
