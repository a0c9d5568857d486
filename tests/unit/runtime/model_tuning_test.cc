// ModelTuning on the CPU backend: one warmup at a time, none after a drain, and the CPU's own
// default results file.
#include "runtime/tuning/model_tuning.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"

namespace tessera {
namespace {

TEST(ModelTuning, NoWarmupStartsAfterADrain) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "tessera_model_tuning_test";
  std::filesystem::create_directories(dir);
  CpuBackend backend(1);
  TuningConfig config;
  config.mode = TuningMode::kTune;
  config.filename = (dir / "results.csv").string();
  config.max_tuning_duration_ms = 1;
  GemmModelShape shape{64, 128, 4, 2, 16, 256, 2, GemmDType::kF32};
  auto tuning = ModelTuning::attach(config, shape, WarmupLimits{16, 4}, {TuningDevice{0, &backend}});
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  WarmupSpec spec = (*tuning)->default_spec();
  spec.buckets.decode = {1};
  spec.limits = WarmupLimits{1, 1};
  auto first = (*tuning)->start_warmup(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  (*first)->wait();

  (*tuning)->cancel_warmup();
  auto after = (*tuning)->start_warmup(spec);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(after.status().message().find("draining"), absl::string_view::npos);
  tuning->reset();
  std::filesystem::remove_all(dir);
}

// With no file name given, a CPU device's results go to the CPU's own file, not the one PyTorch
// and tessera's GPU backend name tunableop_results0.csv.
TEST(ModelTuning, ACpuDeviceTakesTheCpuResultsFileByDefault) {
  CpuBackend backend(1);
  TuningConfig config;
  config.mode = TuningMode::kUse;  // reads the file (none is there), never writes it
  GemmModelShape shape{64, 128, 4, 2, 16, 256, 2, GemmDType::kF32};
  auto tuning = ModelTuning::attach(config, shape, WarmupLimits{16, 4}, {TuningDevice{0, &backend}});
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  ASSERT_EQ((*tuning)->contexts().size(), 1u);
  EXPECT_EQ((*tuning)->contexts()[0]->path(), "tunableop_results_cpu0.csv");
}

}  // namespace
}  // namespace tessera
