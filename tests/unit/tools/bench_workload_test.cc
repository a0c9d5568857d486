#include "tools/bench_workload.h"

#include <cmath>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace tessera::cli {
namespace {

TEST(BuildWorkload, TokenIdPromptsHaveExactLengthsAndExactOutputs) {
  WorkloadOptions o;
  o.prompt_len = *LengthDistribution::parse("uniform:5:50");
  o.output_len = *LengthDistribution::parse("uniform:1:30");
  o.count = 200;
  o.vocab_size = 77;
  const std::string model = "m";
  o.model = model;
  o.seed = 9;
  auto w = build_workload(o, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), 200u);
  for (const BenchRequest& r : *w) {
    ASSERT_TRUE(r.request.has_token_ids());
    EXPECT_EQ(r.request.token_ids().ids_size(), r.prompt_len);
    EXPECT_GE(r.prompt_len, 5);
    EXPECT_LE(r.prompt_len, 50);
    for (int32_t id : r.request.token_ids().ids()) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 77);
    }
    EXPECT_EQ(r.request.stopping().max_tokens(), r.output_len);
    EXPECT_TRUE(r.request.stopping().ignore_eos());
    EXPECT_FLOAT_EQ(r.request.sampling().temperature(), 0.0f);
    EXPECT_EQ(r.request.model(), "m");
  }
}

TEST(BuildWorkload, SameSeedSameWorkload) {
  WorkloadOptions o;
  o.prompt_len = *LengthDistribution::parse("normal:64:16");
  o.count = 20;
  o.vocab_size = 1000;
  o.seed = 3;
  auto a = build_workload(o, nullptr);
  auto b = build_workload(o, nullptr);
  o.seed = 4;
  auto c = build_workload(o, nullptr);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool all_same_as_c = true;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].request.SerializeAsString(), (*b)[i].request.SerializeAsString());
    all_same_as_c &= (*a)[i].request.SerializeAsString() == (*c)[i].request.SerializeAsString();
  }
  EXPECT_FALSE(all_same_as_c);
}

TEST(BuildWorkload, WordPromptsAreFittedWithTheTokenizer) {
  // A tokenizer that adds BOS and splits "university" into two tokens: a word is not a token.
  int calls = 0;
  TokenCounter count = [&calls](const std::string& text) -> absl::StatusOr<int32_t> {
    ++calls;
    int32_t n = 1;
    for (absl::string_view word : absl::StrSplit(text, ' ')) n += word == "university" ? 2 : 1;
    return n;
  };
  WorkloadOptions o;
  o.prompt_kind = PromptKind::kWords;
  o.prompt_len = *LengthDistribution::parse("uniform:10:100");
  o.count = 30;
  o.seed = 1;
  auto w = build_workload(o, count);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const BenchRequest& r : *w) {
    ASSERT_TRUE(r.request.has_prompt());
    EXPECT_EQ(*count(r.request.prompt()), r.prompt_len);
    EXPECT_GE(r.prompt_len, 10);
    EXPECT_LE(r.prompt_len, 100);
  }
  EXPECT_GE(calls, 30);
}

TEST(BuildWorkload, TokenizerErrorsComeBack) {
  WorkloadOptions o;
  o.prompt_kind = PromptKind::kWords;
  o.count = 3;
  auto w = build_workload(o, [](const std::string&) -> absl::StatusOr<int32_t> {
    return absl::UnavailableError("down");
  });
  EXPECT_EQ(w.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(build_workload(o, nullptr).ok());
  o.prompt_kind = PromptKind::kTokenIds;
  o.vocab_size = 0;
  EXPECT_FALSE(build_workload(o, nullptr).ok());
}

TEST(PoissonArrivals, MeanGapIsOneOverRate) {
  PoissonArrivals arrivals(50, 11);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double gap = arrivals.next_gap_seconds();
    ASSERT_GE(gap, 0);
    sum += gap;
  }
  EXPECT_NEAR(sum / n, 1.0 / 50, 0.001);
  PoissonArrivals burst(INFINITY, 1);
  EXPECT_EQ(burst.next_gap_seconds(), 0);
}

}  // namespace
}  // namespace tessera::cli
