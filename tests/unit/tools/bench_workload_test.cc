#include "tools/bench_workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

std::vector<int32_t> ids_of(const BenchRequest& r) {
  return {r.request.token_ids().ids().begin(), r.request.token_ids().ids().end()};
}

TEST(BuildWorkload, SharedPrefixRequestsStartWithOneOfTheSystemPrompts) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kSharedPrefix;
  o.prefix_count = 3;
  o.prefix_len = 40;
  o.prompt_len = *LengthDistribution::parse("uniform:5:9");
  o.output_len = LengthDistribution::fixed(7);
  o.count = 30;
  o.vocab_size = 5000;
  o.seed = 2;
  auto w = build_workload(o, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), 30u);
  std::vector<std::vector<int32_t>> prefixes(3);
  for (size_t i = 0; i < w->size(); ++i) {
    const BenchRequest& r = (*w)[i];
    const std::vector<int32_t> ids = ids_of(r);
    ASSERT_EQ(static_cast<int32_t>(ids.size()), r.prompt_len);
    EXPECT_GE(r.prompt_len, 40 + 5);
    EXPECT_LE(r.prompt_len, 40 + 9);
    EXPECT_EQ(r.output_len, 7);
    EXPECT_EQ(r.conversation, -1);
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 40);
    // Request i shares prefix i mod 3 with every 3rd request.
    if (prefixes[i % 3].empty()) prefixes[i % 3] = prefix;
    EXPECT_EQ(prefix, prefixes[i % 3]) << "request " << i;
  }
  EXPECT_NE(prefixes[0], prefixes[1]);
  EXPECT_NE(prefixes[1], prefixes[2]);
  // The user parts differ even where the prefix is the same.
  EXPECT_NE(ids_of((*w)[0]), ids_of((*w)[3]));

  // Word prompts: the prefix's text starts every prompt of its group; the length is the
  // tokenizer's count of the whole prompt.
  o.prompt_kind = PromptKind::kWords;
  o.count = 6;
  auto words = build_workload(o, [](const std::string& text) -> absl::StatusOr<int32_t> {
    int32_t n = 2;  // a BOS and the first word
    for (char c : text) n += c == ' ' || c == '\n';
    return n;
  });
  ASSERT_TRUE(words.ok()) << words.status();
  const std::string& first = (*words)[0].request.prompt();
  const std::string prefix_text = first.substr(0, first.find('\n'));
  EXPECT_EQ((*words)[3].request.prompt().rfind(prefix_text + "\n", 0), 0u);
  EXPECT_NE((*words)[1].request.prompt().rfind(prefix_text + "\n", 0), 0u);
  for (const BenchRequest& r : *words) {
    EXPECT_GE(r.prompt_len, 40 + 5 - 1);  // each part was fitted with a BOS; the whole has one
    EXPECT_LE(r.prompt_len, 40 + 9 - 1);
  }
}

TEST(BuildWorkload, MultiTurnComesConversationByConversationWithHistoryLengths) {
  WorkloadOptions o;
  o.kind = WorkloadKind::kMultiTurn;
  o.conversations = 3;
  o.turns = 4;
  o.prompt_len = *LengthDistribution::parse("uniform:2:6");
  o.output_len = *LengthDistribution::parse("uniform:3:5");
  o.count = 1000;  // ignored: conversations x turns
  o.vocab_size = 100;
  o.seed = 8;
  auto w = build_workload(o, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), 12u);
  for (size_t i = 0; i < w->size(); ++i) {
    const BenchRequest& r = (*w)[i];
    EXPECT_EQ(r.conversation, static_cast<int32_t>(i / 4));
    EXPECT_EQ(r.turn, static_cast<int32_t>(i % 4));
    const int32_t user = r.request.token_ids().ids_size();  // this turn's part only
    EXPECT_GE(user, 2);
    EXPECT_LE(user, 6);
    // The whole history this turn sends: every earlier user part and answer, then its own part.
    const int32_t history = r.turn == 0 ? 0 : (*w)[i - 1].prompt_len + (*w)[i - 1].output_len;
    EXPECT_EQ(r.prompt_len, history + user) << "request " << i;
    EXPECT_EQ(r.request.stopping().max_tokens(), r.output_len);
  }
}

TEST(BuildWorkload, ShareGptLengthsHaveThePapersShapeWithinVllmsFilter) {
  std::mt19937_64 rng(1);
  const int n = 20000;
  double prompt_sum = 0, output_sum = 0;
  std::vector<int32_t> prompts;
  for (int i = 0; i < n; ++i) {
    const ShareGptLengths l = sharegpt_lengths(rng, 0);
    ASSERT_GE(l.prompt_len, 4);
    ASSERT_GE(l.output_len, 4);
    ASSERT_LE(l.prompt_len, 1024);
    ASSERT_LE(l.prompt_len + l.output_len, 2048);
    prompt_sum += l.prompt_len;
    output_sum += l.output_len;
    prompts.push_back(l.prompt_len);
  }
  // The filter trims the tails, so the means land a little under the paper's 161 and 338.
  EXPECT_GT(prompt_sum / n, 161 * 0.85);
  EXPECT_LT(prompt_sum / n, 161 * 1.02);
  EXPECT_GT(output_sum / n, 338 * 0.8);
  EXPECT_LT(output_sum / n, 338 * 1.02);
  std::sort(prompts.begin(), prompts.end());
  EXPECT_LT(prompts[n / 2], 161 * 0.75);  // a long tail: the median well under the mean
  // A small context caps both.
  for (int i = 0; i < 1000; ++i) {
    const ShareGptLengths l = sharegpt_lengths(rng, 256);
    ASSERT_LE(l.prompt_len + l.output_len, 256);
    ASSERT_GE(l.prompt_len, 4);
  }
  const ShareGptLengths tiny = sharegpt_lengths(rng, 6);
  EXPECT_LE(tiny.prompt_len + tiny.output_len, 6);

  WorkloadOptions o;
  o.kind = WorkloadKind::kShareGpt;
  o.count = 50;
  o.vocab_size = 1000;
  o.max_model_len = 512;
  auto w = build_workload(o, nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const BenchRequest& r : *w) {
    EXPECT_EQ(r.request.token_ids().ids_size(), r.prompt_len);
    EXPECT_LE(r.prompt_len + r.output_len, 512);
  }
}

TEST(BuildWorkload, EveryWorkloadIsTheSameForTheSameSeed) {
  for (const WorkloadKind kind : {WorkloadKind::kRandom, WorkloadKind::kSharedPrefix,
                                  WorkloadKind::kMultiTurn, WorkloadKind::kShareGpt}) {
    SCOPED_TRACE(workload_name(kind));
    WorkloadOptions o;
    o.kind = kind;
    o.prompt_len = *LengthDistribution::parse("uniform:4:40");
    o.output_len = *LengthDistribution::parse("uniform:4:40");
    o.count = 12;
    o.vocab_size = 1000;
    o.seed = 21;
    auto a = build_workload(o, nullptr);
    auto b = build_workload(o, nullptr);
    o.seed = 22;
    auto c = build_workload(o, nullptr);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    ASSERT_EQ(a->size(), b->size());
    bool all_same_as_c = a->size() == c->size();
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].request.SerializeAsString(), (*b)[i].request.SerializeAsString());
      EXPECT_EQ((*a)[i].output_len, (*b)[i].output_len);
      all_same_as_c &= i < c->size() &&
                       (*a)[i].request.SerializeAsString() == (*c)[i].request.SerializeAsString();
    }
    EXPECT_FALSE(all_same_as_c);
    EXPECT_EQ(parse_workload_kind(workload_name(kind)).value(), kind);
  }
  EXPECT_FALSE(parse_workload_kind("chat").ok());
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
