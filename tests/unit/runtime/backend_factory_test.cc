#include "runtime/backend_factory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(BackendFactory, ParsesKindsAndNamesBadOnes) {
  EXPECT_EQ(*parse_backend_kind("auto"), BackendKind::kAuto);
  EXPECT_EQ(*parse_backend_kind("cpu"), BackendKind::kCpu);
  EXPECT_EQ(*parse_backend_kind("gpu"), BackendKind::kGpu);
  auto bad = parse_backend_kind("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("\"tpu\""));
  EXPECT_EQ(backend_kind_name(BackendKind::kGpu), "gpu");
}

TEST(BackendFactory, CpuIsAlwaysCpu) {
  auto b = create_backend({BackendKind::kCpu, 0, 1});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->compute_dtype(), DType::kF32);
}

// This test machine has no GPU (CI never does): auto falls back to the CPU, gpu refuses and
// says why. On a GPU host both take the GPU, which the GPU tests cover.
TEST(BackendFactory, WithoutAGpuAutoFallsBackAndGpuRefuses) {
  if (visible_gpus() > 0) GTEST_SKIP() << "a GPU is visible";
  auto autob = create_backend({BackendKind::kAuto, 0, 1});
  ASSERT_TRUE(autob.ok()) << autob.status();
  EXPECT_EQ((*autob)->compute_dtype(), DType::kF32);
  auto gpu = create_backend({BackendKind::kGpu, 0, 1});
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gpu.status().message()),
              HasSubstr(built_with_gpu() ? "no GPU is visible" : "built without a GPU backend"));
}

}  // namespace
}  // namespace tessera
