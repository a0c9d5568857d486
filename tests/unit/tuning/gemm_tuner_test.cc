// The selection loop over a scripted device: a wrong candidate is rejected, a slow one pruned,
// the fastest kept, and the rotation sized from the config.
#include "runtime/tuning/gemm_tuner.h"

#include <chrono>

#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/tuning/fake_tunable_gemm.h"

namespace tessera {
namespace {

using testing::FakeCandidate;
using testing::FakeTunableGemm;

GemmSignature sig() { return GemmSignature::for_linear(4, 8, 16, GemmDType::kF32, GemmDType::kF32); }

const CandidateReport& report(const TuneOutcome& o, const std::string& name) {
  for (const CandidateReport& r : o.candidates) {
    if (r.solution == name) return r;
  }
  ADD_FAILURE() << "no report for " << name;
  return o.candidates.front();
}

TEST(GemmTuner, RejectsWrongPrunesSlowKeepsFastest) {
  FakeTunableGemm gemm({{"Default", 1.0},
                        {"wrong", 0.1, /*offset=*/0.5f},
                        {"slow", 5.0},
                        {"broken", 0.1, 0.0f, /*fails=*/true},
                        {"fast", 0.5}});
  TuningConfig config;
  config.rotating_buffer_size_mb = 0;
  absl::StatusOr<TuneOutcome> o = tune_gemm(gemm, sig(), config);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->best, "fast");
  EXPECT_DOUBLE_EQ(o->best_ms, 0.5);
  EXPECT_DOUBLE_EQ(o->default_ms, 1.0);
  EXPECT_DOUBLE_EQ(o->gain(), 2.0);
  EXPECT_EQ(report(*o, "wrong").verdict, CandidateVerdict::kRejected);
  EXPECT_NEAR(report(*o, "wrong").max_error, 0.5, 1e-6);
  EXPECT_EQ(report(*o, "slow").verdict, CandidateVerdict::kPruned);
  EXPECT_EQ(report(*o, "broken").verdict, CandidateVerdict::kFailed);
  EXPECT_EQ(report(*o, "fast").verdict, CandidateVerdict::kTimed);
  // The rejected and the pruned candidates get the rough timing only.
  EXPECT_EQ(gemm.timed["wrong"], (std::vector<int64_t>{kRoughIterations}));
  EXPECT_EQ(gemm.timed["slow"], (std::vector<int64_t>{kRoughIterations}));
  // Full timing: 30 ms cap / 0.5 ms = 60 calls, under the 100-call cap.
  EXPECT_EQ(gemm.timed["fast"].back(), 60);
  EXPECT_EQ(gemm.prepares, 1);
  EXPECT_EQ(gemm.releases, 1);
}

TEST(GemmTuner, OnlyTheFastestRoughTimingsAreCheckedAndTimed) {
  // Twelve candidates all faster than the default: the kMaxFullTimings fastest by rough timing
  // are checked and timed, the rest pruned; the best of them wins.
  std::vector<FakeCandidate> list = {{"Default", 1.0}};
  for (int i = 0; i < 12; ++i) list.push_back({"c" + std::to_string(i), 0.9 - 0.02 * i});
  FakeTunableGemm gemm(list);
  absl::StatusOr<TuneOutcome> o = tune_gemm(gemm, sig(), TuningConfig{});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->best, "c11");
  int timed = 0, pruned = 0;
  for (const CandidateReport& r : o->candidates) {
    if (r.solution == kDefaultSolution) continue;
    timed += r.verdict == CandidateVerdict::kTimed;
    pruned += r.verdict == CandidateVerdict::kPruned;
  }
  EXPECT_EQ(timed, kMaxFullTimings);
  EXPECT_EQ(pruned, 12 - kMaxFullTimings);
  EXPECT_EQ(report(*o, "c0").verdict, CandidateVerdict::kPruned);  // the slowest rough timing
  EXPECT_NE(report(*o, "c0").reason.find("fastest"), std::string::npos);
}

TEST(GemmTuner, KeepsDefaultWhenNothingIsFaster) {
  FakeTunableGemm gemm({{"Default", 1.0}, {"same", 1.0}, {"slower", 1.5}});
  absl::StatusOr<TuneOutcome> o = tune_gemm(gemm, sig(), TuningConfig{});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->best, kDefaultSolution);
  EXPECT_DOUBLE_EQ(o->gain(), 1.0);
}

TEST(GemmTuner, WithoutNumericalCheckAWrongCandidateCanWin) {
  FakeTunableGemm gemm({{"Default", 1.0}, {"wrong", 0.1, 0.5f}});
  TuningConfig config;
  config.numerical_check = false;
  absl::StatusOr<TuneOutcome> o = tune_gemm(gemm, sig(), config);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->best, "wrong");
}

TEST(GemmTuner, ToleranceFollowsTheDtype) {
  FakeTunableGemm gemm({{"Default", 1.0}, {"close", 0.5, 1e-3f}});
  const GemmSignature bf16 =
      GemmSignature::for_linear(4, 8, 16, GemmDType::kBF16, GemmDType::kBF16);
  absl::StatusOr<TuneOutcome> loose = tune_gemm(gemm, bf16, TuningConfig{});
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose->best, "close");  // 1e-3 is inside bf16's 1e-2
  absl::StatusOr<TuneOutcome> strict = tune_gemm(gemm, sig(), TuningConfig{});
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(strict->best, kDefaultSolution);  // but outside fp32's 1e-5
}

TEST(GemmTuner, ErrorsWhenTheDefaultIsNotFirstOrFails) {
  FakeTunableGemm no_default({{"fast", 0.5}, {"Default", 1.0}});
  absl::StatusOr<TuneOutcome> o = tune_gemm(no_default, sig(), TuningConfig{});
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find(sig().key()), absl::string_view::npos) << o.status();
  FakeTunableGemm failing({{"Default", 1.0, 0.0f, true}});
  EXPECT_FALSE(tune_gemm(failing, sig(), TuningConfig{}).ok());
  EXPECT_EQ(failing.releases, 1);
}

TEST(GemmTuner, RotationCopies) {
  TuningConfig config;
  config.rotating_buffer_size_mb = -1;  // the cache
  EXPECT_EQ(rotating_copies(config, 1 << 20, 10 << 20), 10);
  EXPECT_EQ(rotating_copies(config, 3 << 20, 10 << 20), 4);  // rounded up
  EXPECT_EQ(rotating_copies(config, 64 << 20, 10 << 20), 1);
  config.rotating_buffer_size_mb = 0;
  EXPECT_EQ(rotating_copies(config, 1 << 20, 10 << 20), 1);
  config.rotating_buffer_size_mb = 3;
  EXPECT_EQ(rotating_copies(config, 1 << 20, 10 << 20), 3);

  FakeTunableGemm gemm({{"Default", 1.0}});
  gemm.operand_bytes_ = 1 << 20;
  gemm.cache_bytes_ = 5 << 20;
  TuningConfig auto_config;
  ASSERT_TRUE(tune_gemm(gemm, sig(), auto_config).ok());
  EXPECT_EQ(gemm.copies_prepared, 5);
}

TEST(GemmTuner, IterationCapBoundsTheTiming) {
  FakeTunableGemm gemm({{"Default", 0.001}});
  TuningConfig config;
  config.max_tuning_iterations = 7;
  ASSERT_TRUE(tune_gemm(gemm, sig(), config).ok());
  EXPECT_EQ(gemm.timed["Default"].back(), 7);
}

TEST(GemmTuner, HistorySkipsWhatWasSlowAtANeighbouringTokenCount) {
  FakeTunableGemm gemm({{"Default", 1.0},
                        {"slow", 5.0},
                        {"broken", 0.1, 0.0f, /*fails=*/true},
                        {"close", 0.6},
                        {"fast", 0.5}});
  auto at = [](int64_t tokens, int64_t out = 8) {
    return GemmSignature::for_linear(tokens, out, 16, GemmDType::kF32, GemmDType::kF32);
  };
  TuneHistory history;
  absl::StatusOr<TuneOutcome> first = tune_gemm(gemm, at(4), TuningConfig{}, &history);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->rough_timed, 5);
  EXPECT_EQ(gemm.timed["slow"].size(), 1u);

  // 5 tokens is within reach of 4: "slow" (10x the best) and "broken" are not timed again;
  // "close" (1.2x) is.
  absl::StatusOr<TuneOutcome> near = tune_gemm(gemm, at(5), TuningConfig{}, &history);
  ASSERT_TRUE(near.ok()) << near.status();
  EXPECT_EQ(near->best, "fast");
  EXPECT_EQ(near->rough_timed, 3);
  EXPECT_EQ(report(*near, "slow").verdict, CandidateVerdict::kSkipped);
  EXPECT_NE(report(*near, "slow").reason.find("n=4"), std::string::npos) << report(*near, "slow").reason;
  EXPECT_EQ(report(*near, "broken").verdict, CandidateVerdict::kSkipped);
  EXPECT_EQ(report(*near, "close").verdict, CandidateVerdict::kTimed);
  EXPECT_EQ(gemm.timed["slow"].size(), 1u);

  // Another family (other out features) has no history; and at 8 tokens the verdict from 4 has
  // aged out (8 / 4 > kHistoryReach), so everything is timed again.
  ASSERT_TRUE(tune_gemm(gemm, at(5, 16), TuningConfig{}, &history).ok());
  EXPECT_EQ(gemm.timed["slow"].size(), 2u);
  absl::StatusOr<TuneOutcome> far = tune_gemm(gemm, at(8), TuningConfig{}, &history);
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_EQ(far->rough_timed, 5);
  EXPECT_EQ(gemm.timed["slow"].size(), 3u);
  EXPECT_EQ(report(*far, "broken").verdict, CandidateVerdict::kFailed);
}

TEST(GemmTuner, PhasesAreMeasured) {
  FakeTunableGemm gemm({{"Default", 1.0}, {"fast", 0.5}});
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<TuneOutcome> o = tune_gemm(gemm, sig(), TuningConfig{});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(o.ok()) << o.status();
  // The phases are disjoint parts of the call: together they take some of its time, never more.
  const double phases = o->phases.list + o->phases.prepare + o->phases.rough + o->phases.final;
  EXPECT_GT(phases, 0.0);
  EXPECT_LE(phases, wall);
  EXPECT_EQ(o->rough_timed, 2);
}

TEST(TunableGemmHostDefaults, CompareOutputsByTolerance) {
  const std::vector<float> ref = {1.0f, -2.0f, 0.0f};
  OutputComparison same = compare_outputs(ref, ref, 1e-2, 1e-2);
  EXPECT_TRUE(same.within);
  EXPECT_EQ(same.max_error, 0.0);
  OutputComparison off = compare_outputs({1.0f, -2.0f, 0.5f}, ref, 1e-2, 1e-2);
  EXPECT_FALSE(off.within);
  EXPECT_NEAR(off.max_error, 0.5, 1e-9);
  OutputComparison nan = compare_outputs({1.0f, NAN, 0.0f}, ref, 1e-2, 1e-2);
  EXPECT_FALSE(nan.within);
  EXPECT_TRUE(std::isinf(nan.max_error));
  EXPECT_FALSE(compare_outputs({1.0f}, ref, 1, 1).within);
}

}  // namespace
}  // namespace tessera
