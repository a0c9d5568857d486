// Weights checked at load, end to end on the CPU backend: a model file with NaN planted in one
// weight -- 1 KiB of 0xff bytes over whole blocks of the default model's GGUF, or one fp32 NaN in
// a safetensors checkpoint -- fails ModelInstance::load naming the tensor and the first bad
// element; the same file unplanted loads.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "base/str_cat.h"
#include "runtime/model_instance.h"
#include "runtime/model_io/gguf_file.h"
#include "tests/unit/runtime/planted_weights.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

InstanceOptions cpu_options() {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.backend.threads = 1;
  options.limits.max_batch_tokens = 64;
  options.limits.max_logit_rows = 4;
  options.engine.max_num_seqs = 4;
  options.kv_cache_bytes = 8 << 20;
  return options;
}

std::string temp_path(const std::string& name) {
  return (fs::path(::testing::TempDir()) / (std::to_string(::getpid()) + "_" + name)).string();
}

TEST(WeightCheckTest, DefaultModelWithOneKibOfGarbageFailsToLoadNamingTheElement) {
  const std::string model = TESSERA_DEFAULT_MODEL;
  if (!fs::exists(model)) GTEST_SKIP() << model << " is missing (scripts/fetch-model.sh)";
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(model);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufTensorInfo* t = (*f)->find_tensor("blk.3.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  const DTypeTraits& traits = *dtype_traits(static_cast<uint32_t>(t->dtype));
  // 1 KiB from the start of block 100: every field of those blocks 0xff, their scales NaN.
  const uint64_t first_block = 100;
  const std::string planted = temp_path("garbage.gguf");
  ASSERT_EQ(testing::plant_in_gguf(model, planted, "blk.3.ffn_up.weight",
                                   first_block * traits.block_bytes, std::string(1024, '\xff')),
            "");
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(planted, cpu_options());
  fs::remove(planted);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const int64_t element = static_cast<int64_t>(first_block * traits.block_elems);
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(str_cat("tensor 'model.layers.3.mlp.up_proj.weight' (GGUF "
                                "'blk.3.ffn_up.weight'): element ", element, " (row ",
                                element / t->shape[1], ", column ", element % t->shape[1],
                                ") of ", traits.name)));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("is NaN"));
}

TEST(WeightCheckTest, SafetensorsWithOneNanFailsToLoadAndTheCleanCopyLoads) {
  const fs::path fixture = fs::path(TESSERA_SOURCE_DIR) / "tests/data/families/llama/hf";
  const std::string name = "model.layers.0.self_attn.o_proj.weight";
  const std::string dir = temp_path("nan_llama");
  ASSERT_EQ(testing::plant_in_safetensors(fixture.string(), dir, name, 123 * 4,
                                          testing::float_bytes(
                                              std::numeric_limits<float>::quiet_NaN())),
            "");
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(dir, cpu_options());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr(str_cat("tensor '", name, "': element 123 (row ")));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("is NaN"));
  // Finite bytes in the same place load.
  ASSERT_EQ(testing::plant_in_safetensors(fixture.string(), dir, name, 123 * 4,
                                          testing::float_bytes(0.5f)),
            "");
  m = ModelInstance::load(dir, cpu_options());
  EXPECT_TRUE(m.ok()) << m.status();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessera
