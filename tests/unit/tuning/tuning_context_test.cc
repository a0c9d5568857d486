// The mode rules of a device's tuning context, its results file (load, validators, hand edits,
// save round trip) and a warmup over two devices, on scripted devices.
#include "runtime/tuning/tuning_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "runtime/tuning/warmup_job.h"
#include "tests/unit/tuning/fake_tunable_gemm.h"

namespace tessera {
namespace {

using testing::FakeTunableGemm;

const GemmSignature kSig = GemmSignature::for_linear(1, 8, 16, GemmDType::kF32, GemmDType::kF32);
const GemmSignature kOther = GemmSignature::for_linear(2, 8, 16, GemmDType::kF32, GemmDType::kF32);

FakeTunableGemm device() { return FakeTunableGemm({{"Default", 1.0}, {"fast", 0.25}}); }

class TuningContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tuning_ctx_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  TuningConfig config(TuningMode mode) {
    TuningConfig c;
    c.mode = mode;
    c.filename = (dir_ / "results.csv").string();
    c.rotating_buffer_size_mb = 0;
    return c;
  }
  std::string path() const { return (dir_ / "results0.csv").string(); }
  void write(const std::string& text) { std::ofstream(path()) << text; }
  std::string read() const {
    std::ifstream in(path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string header() { return "Validator,TESSERA_VERSION,test\nValidator,DEVICE_NAME,fake\n"; }

  std::filesystem::path dir_;
};

TEST_F(TuningContextTest, OffAnswersNothingAndReadsNothing) {
  write(header() + kSig.key() + ",fast,0.25\n");
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kOff), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ((*ctx)->solution_for(kSig), std::nullopt);
  EXPECT_TRUE((*ctx)->results().empty());
  EXPECT_EQ(gemm.prepares, 0);
  EXPECT_EQ((*ctx)->counters().hits + (*ctx)->counters().misses, 0u);
}

TEST_F(TuningContextTest, UseReadsTheFileAndNeverTunes) {
  write(header() + kSig.key() + ",fast,0.25\n");
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kUse), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ((*ctx)->solution_for(kSig), "fast");
  EXPECT_EQ((*ctx)->solution_for(kOther), std::nullopt);
  EXPECT_EQ(gemm.prepares, 0);
  EXPECT_EQ((*ctx)->counters().hits, 1u);
  EXPECT_EQ((*ctx)->counters().misses, 1u);
}

TEST_F(TuningContextTest, TuneTunesAMissSavesAndTheFileReadsBack) {
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kTune), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  const uint64_t v0 = (*ctx)->version();
  EXPECT_EQ((*ctx)->solution_for(kSig), "fast");
  // Tuned before it was answered: no answer anyone keeps has changed.
  EXPECT_EQ((*ctx)->version(), v0);
  EXPECT_EQ(gemm.prepares, 1);
  EXPECT_EQ((*ctx)->solution_for(kSig), "fast");  // now a hit, not tuned again
  EXPECT_EQ(gemm.prepares, 1);
  const GemmTuningCounters c = (*ctx)->counters();
  EXPECT_EQ(c.shapes_tuned, 1u);
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.misses, 1u);
  EXPECT_DOUBLE_EQ((*ctx)->gains().at(kSig), 4.0);
  EXPECT_NE(read().find(kSig.key() + ",fast,0.25"), std::string::npos) << read();
  EXPECT_EQ(read().rfind("Validator,", 0), 0u) << read();

  FakeTunableGemm again = device();
  auto reloaded =
      TuningContext::create(config(TuningMode::kUse), TuningDeviceKind::kGpu, 0, &again);
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ((*reloaded)->solution_for(kSig), "fast");
  EXPECT_TRUE((*reloaded)->load_warnings().empty());
}

TEST_F(TuningContextTest, ValidatorMismatchIgnoresTheFileNamingTheKeyAndRetunes) {
  write("Validator,TESSERA_VERSION,test\nValidator,DEVICE_NAME,another-gpu\n" + kSig.key() +
        ",hand_picked,0.1\n");
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kTune), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  bool named = false;
  for (const std::string& w : (*ctx)->load_warnings()) {
    if (w.find("DEVICE_NAME") != std::string::npos && w.find("another-gpu") != std::string::npos) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << ::testing::PrintToString((*ctx)->load_warnings());
  EXPECT_TRUE((*ctx)->results().empty());
  EXPECT_EQ((*ctx)->solution_for(kSig), "fast");  // re-tuned
  EXPECT_NE(read().find("DEVICE_NAME,fake"), std::string::npos) << read();
  EXPECT_EQ(read().find("hand_picked"), std::string::npos) << read();
}

TEST_F(TuningContextTest, HandEditedSolutionIsHonouredAndCorruptLinesSkipped) {
  write(header() + "GemmTunableOp_float_TN,tn_oops\n" + kSig.key() + ",my_own_kernel\n");
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kTune), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_EQ((*ctx)->solution_for(kSig), "my_own_kernel");
  EXPECT_EQ(gemm.prepares, 0);
  ASSERT_EQ((*ctx)->load_warnings().size(), 1u);
  EXPECT_NE((*ctx)->load_warnings()[0].find(":3:"), std::string::npos)
      << (*ctx)->load_warnings()[0];
}

TEST_F(TuningContextTest, UnreadableFileIsAnErrorNamingThePath) {
  std::filesystem::create_directories(path());  // a directory where the file should be
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kUse), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_FALSE(ctx.ok());
  EXPECT_NE(ctx.status().message().find(path()), absl::string_view::npos) << ctx.status();
}

TEST_F(TuningContextTest, ExplicitTuneReportsCachedUnlessForced) {
  write(header() + kSig.key() + ",fast,0.25\n");
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kTune), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok());
  GemmTuneReport cached = (*ctx)->tune(kSig, /*force=*/false);
  EXPECT_EQ(cached.outcome, GemmTuneOutcome::kCached);
  EXPECT_EQ(cached.solution, "fast");
  EXPECT_EQ(gemm.prepares, 0);
  GemmTuneReport forced = (*ctx)->tune(kSig, /*force=*/true);
  EXPECT_EQ(forced.outcome, GemmTuneOutcome::kTuned);
  EXPECT_DOUBLE_EQ(forced.gain, 4.0);
  EXPECT_EQ(gemm.prepares, 1);
}

TEST_F(TuningContextTest, WarmupTunesThePlanOnEveryDevice) {
  FakeTunableGemm gemm0 = device();
  FakeTunableGemm gemm1 = device();
  auto ctx0 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm0);
  auto ctx1 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 1, &gemm1);
  ASSERT_TRUE(ctx0.ok() && ctx1.ok());
  std::vector<WarmupGemm> plan = {{kSig, "qkv_proj", 1, 2}, {kOther, "o_proj", 2, 2}};
  std::vector<size_t> seen_done;
  std::mutex mu;
  auto job = WarmupJob::start({ctx0->get(), ctx1->get()}, plan, WarmupOptions{},
                              [&](WarmupState, size_t done, size_t) {
                                std::lock_guard<std::mutex> lock(mu);
                                seen_done.push_back(done);
                              });
  const WarmupSnapshot s = job->wait();
  EXPECT_EQ(s.state, WarmupState::kDone);
  EXPECT_EQ(s.done, 4u);
  EXPECT_EQ(s.total, 4u);
  ASSERT_EQ(s.reports.size(), 4u);
  for (const GemmTuneReport& r : s.reports) {
    EXPECT_EQ(r.outcome, GemmTuneOutcome::kTuned);
    EXPECT_EQ(r.solution, "fast");
    EXPECT_FALSE(r.used_by.empty());
  }
  EXPECT_EQ(gemm0.prepares, 2);
  EXPECT_EQ(gemm1.prepares, 2);
  EXPECT_EQ(seen_done.size(), 5u);  // four GEMMs, then the end
  EXPECT_TRUE(std::filesystem::exists((dir_ / "results1.csv")));
}

// A warmup beside a serving engine: tuning shapes nobody has run leaves the version (and so every
// recorded decode graph) alone; tuning a shape the engine runs moves it, once -- never once per
// GEMM of the plan.
TEST_F(TuningContextTest, AWarmupMovesTheVersionOnlyWhenAnAnswerInUseChanges) {
  FakeTunableGemm gemm = device();
  // use: solution_for never tunes, so the engine's miss stays untuned until a warmup.
  auto ctx = TuningContext::create(config(TuningMode::kUse), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok());
  EXPECT_EQ((*ctx)->solution_for(kSig), std::nullopt);  // the engine runs kSig
  const uint64_t v0 = (*ctx)->version();

  std::vector<WarmupGemm> plan;
  for (int64_t t = 2; t <= 9; ++t) {
    plan.push_back({GemmSignature::for_linear(t, 8, 16, GemmDType::kF32, GemmDType::kF32),
                    "qkv_proj", t, 1});
  }
  WarmupJob::start({ctx->get()}, plan, WarmupOptions{})->wait();
  EXPECT_EQ((*ctx)->results().size(), plan.size());
  EXPECT_EQ((*ctx)->version(), v0);

  plan.push_back({kSig, "qkv_proj", 1, 1});
  WarmupOptions force;
  force.force = true;
  WarmupJob::start({ctx->get()}, plan, force)->wait();
  EXPECT_EQ((*ctx)->version(), v0 + 1);  // kSig's default was replaced; the rest nobody asked for
  EXPECT_EQ((*ctx)->solution_for(kSig), "fast");

  // Re-tuned to the same solution: nothing to record again.
  WarmupJob::start({ctx->get()}, {{kSig, "qkv_proj", 1, 1}}, force)->wait();
  EXPECT_EQ((*ctx)->version(), v0 + 1);
}

TEST_F(TuningContextTest, WarmupBudgetSkipsTheRest) {
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok());
  WarmupOptions options;
  options.time_budget_seconds = 1e-9;  // spent before the first GEMM starts
  auto job = WarmupJob::start({ctx->get()}, {{kSig, "qkv_proj", 1, 1}}, options);
  const WarmupSnapshot s = job->wait();
  EXPECT_EQ(s.state, WarmupState::kDone);
  ASSERT_EQ(s.reports.size(), 1u);
  EXPECT_EQ(s.reports[0].outcome, GemmTuneOutcome::kSkipped);
  EXPECT_NE(s.message.find("time budget"), std::string::npos) << s.message;
  EXPECT_EQ(gemm.prepares, 0);
}

TEST_F(TuningContextTest, OnlyTheLastDeviceTunesLmHead) {
  FakeTunableGemm gemm0 = device();
  FakeTunableGemm gemm1 = device();
  auto ctx0 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm0);
  auto ctx1 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 1, &gemm1);
  ASSERT_TRUE(ctx0.ok() && ctx1.ok());
  std::vector<WarmupGemm> plan = {{kSig, "qkv_proj", 1, 2}, {kOther, "lm_head", 1, 1}};
  auto job = WarmupJob::start({ctx0->get(), ctx1->get()}, plan, WarmupOptions{});
  const WarmupSnapshot s = job->wait();
  EXPECT_EQ(s.state, WarmupState::kDone);
  EXPECT_EQ(s.total, 3u);
  EXPECT_EQ(s.done, 3u);
  EXPECT_EQ(gemm0.prepares, 1);  // qkv_proj only
  EXPECT_EQ(gemm1.prepares, 2);  // qkv_proj and lm_head
}

// Tensor parallelism: every rank of the last stage runs (and tunes) its slice of lm_head.
TEST_F(TuningContextTest, EveryDeviceMarkedAsRunningTheHeadTunesLmHead) {
  FakeTunableGemm gemm0 = device();
  FakeTunableGemm gemm1 = device();
  FakeTunableGemm gemm2 = device();
  auto ctx0 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm0);
  auto ctx1 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 1, &gemm1);
  auto ctx2 = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 2, &gemm2);
  ASSERT_TRUE(ctx0.ok() && ctx1.ok() && ctx2.ok());
  std::vector<WarmupGemm> plan = {{kSig, "qkv_proj", 1, 2}, {kOther, "lm_head", 1, 1}};
  auto job = WarmupJob::start({ctx0->get(), ctx1->get(), ctx2->get()}, plan, WarmupOptions{}, {},
                              {false, true, true});
  const WarmupSnapshot s = job->wait();
  EXPECT_EQ(s.state, WarmupState::kDone);
  EXPECT_EQ(s.total, 5u);  // qkv_proj on three devices, lm_head on two
  EXPECT_EQ(s.done, 5u);
  EXPECT_EQ(gemm0.prepares, 1);  // qkv_proj only
  EXPECT_EQ(gemm1.prepares, 2);  // qkv_proj and lm_head
  EXPECT_EQ(gemm2.prepares, 2);
}

// The next GEMM's candidates are listed while the current one is tuned: each prefetch must
// reach the candidates() of its own signature (a GPU keeps one listing in flight, and a later
// prefetch replaces it), so every GEMM of the plan after the first takes a prefetched listing.
TEST_F(TuningContextTest, WarmupPrefetchesReachTheirGemms) {
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok());
  std::vector<WarmupGemm> plan;
  for (int64_t t = 1; t <= 4; ++t) {
    plan.push_back({GemmSignature::for_linear(t, 8, 16, GemmDType::kF32, GemmDType::kF32),
                    "qkv_proj", t, 1});
  }
  const WarmupSnapshot s = WarmupJob::start({ctx->get()}, plan, WarmupOptions{})->wait();
  EXPECT_EQ(s.done, plan.size());
  EXPECT_EQ(gemm.prepares, 4);
  EXPECT_EQ(gemm.prefetches, 3);
  EXPECT_EQ(gemm.prefetch_hits, 3);
}

TEST_F(TuningContextTest, CancelledWarmupSkipsWhatIsLeft) {
  FakeTunableGemm gemm = device();
  auto ctx = TuningContext::create(config(TuningMode::kWarmup), TuningDeviceKind::kGpu, 0, &gemm);
  ASSERT_TRUE(ctx.ok());
  std::shared_ptr<WarmupJob> job;
  // The worker reports the first GEMM, then waits until the test has cancelled: the second is
  // then always skipped.
  std::atomic<bool> first_done{false}, cancelled{false};
  job = WarmupJob::start({ctx->get()}, {{kSig, "a", 1, 1}, {kOther, "b", 2, 1}}, WarmupOptions{},
                         [&](WarmupState, size_t done, size_t) {
                           if (done != 1) return;
                           first_done = true;
                           while (!cancelled) std::this_thread::yield();
                         });
  while (!first_done) std::this_thread::yield();
  job->cancel();
  cancelled = true;
  const WarmupSnapshot s = job->wait();
  EXPECT_EQ(s.state, WarmupState::kCancelled);
  EXPECT_EQ(s.done, 2u);
  ASSERT_EQ(s.reports.size(), 2u);
  EXPECT_EQ(s.reports[1].outcome, GemmTuneOutcome::kSkipped);
}

}  // namespace
}  // namespace tessera
