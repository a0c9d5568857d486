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

TEST(BackendFactory, ParsesGpuDtypesByLongAndShortName) {
  EXPECT_EQ(*parse_gpu_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(*parse_gpu_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(*parse_gpu_dtype("float16"), DType::kF16);
  EXPECT_EQ(*parse_gpu_dtype("fp16"), DType::kF16);
  for (const char* bad : {"float32", "half", "BF16", ""}) {
    auto d = parse_gpu_dtype(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(std::string("\"") + bad + "\""));
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("bfloat16 (bf16), float16 (fp16)"));
  }
  EXPECT_EQ(gpu_dtype_name(DType::kBF16), "bfloat16");
  EXPECT_EQ(gpu_dtype_name(DType::kF16), "float16");
  EXPECT_EQ(gpu_dtype_name(DType::kF32), dtype_name(DType::kF32));
}

// The CPU backend computes in fp32 whatever the GPU dtype: the default (bf16) is no request of
// the CPU's, float16 is one it cannot honour, refused by every way of reaching the CPU.
TEST(BackendFactory, CpuRefusesFloat16AndIgnoresTheDefault) {
  BackendOptions options{BackendKind::kCpu, 0, 1};
  ASSERT_EQ(options.gpu_dtype, DType::kBF16);
  auto plain = create_backend(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->compute_dtype(), DType::kF32);

  options.gpu_dtype = DType::kF16;
  auto refused = create_backend(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("dtype: float16"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("backend is cpu"));

  options.devices = {0, 1};
  auto split = create_backends(options);
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(std::string(split.status().message()), HasSubstr("dtype: float16"));

  if (visible_gpus() == 0) {
    options = BackendOptions{BackendKind::kAuto, 0, 1};
    options.gpu_dtype = DType::kF16;
    auto fallback = create_backend(options);
    ASSERT_FALSE(fallback.ok());
    EXPECT_THAT(std::string(fallback.status().message()), HasSubstr("found no GPU"));
  }
}

// CPU "devices" are numbered as listed (the backends' names and ordinals say so), and all
// devices on the CPU are the one host.
TEST(BackendFactory, CpuDeviceListsAreNumberedAsListed) {
  BackendOptions options{BackendKind::kCpu, 0, 1};
  options.devices = {2, 5};
  auto listed = create_backends(options);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].ordinal, 2);
  EXPECT_EQ((*listed)[0].backend->name(), "cpu:2");
  EXPECT_EQ((*listed)[1].ordinal, 5);
  EXPECT_EQ((*listed)[1].backend->name(), "cpu:5");

  options.devices = {3, 3};
  auto twice = create_backends(options);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("device 3 is listed twice"));

  options.devices.clear();
  options.all_devices = true;
  auto all = create_backends(options);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].ordinal, 0);
  EXPECT_EQ((*all)[0].backend->name(), "cpu");
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
