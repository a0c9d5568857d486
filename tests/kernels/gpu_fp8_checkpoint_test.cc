// An FP8 checkpoint served in FP8 on the GPU (`quantization: fp8`): the llama family fixture written
// as an llm-compressor FP8 checkpoint (per-channel e4m3fn codes) keeps its stored codes on the
// device (WeightLoader::load_fp8_codes, GpuBackend::upload_bytes), and its logits match those of
// its dequantized fp32 twin served in the compute dtype within that dtype's rounding: prompts of
// a few tokens run the FP8-weight kernels, which widen the codes exactly. `quantization: auto` (no
// choice made) keeps such a checkpoint in FP8 too, with the same logits, and a 16-bit checkpoint
// in its dtype. Skips without a GPU with FP8.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gpu_backend.h"
#include "runtime/model_instance.h"
#include "tests/unit/runtime/family_fixtures.h"
#include "tests/unit/runtime/fp8_checkpoint_writer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

// quantization unset: auto.
std::unique_ptr<ModelInstance> load_on_gpu(const fs::path& dir,
                                           std::optional<Quantization> quantization) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kGpu;
  options.quantization = quantization;
  options.limits.max_batch_tokens = 256;
  options.limits.max_logit_rows = 8;
  options.engine.max_num_seqs = 8;
  options.kv_cache_bytes = 16 << 20;
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(dir, options);
  EXPECT_TRUE(m.ok()) << dir << ": " << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

TEST(GpuFp8Checkpoint, KeepsItsCodesAndMatchesItsDequantizedTwin) {
  if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
  {
    auto probe = GpuBackend::create(0, DType::kBF16);
    ASSERT_TRUE(probe.ok()) << probe.status();
    if (absl::Status s = (*probe)->supports(Quantization::kFp8); !s.ok()) GTEST_SKIP() << s;
  }
  // The fixture of the source tree the test was built in, or TESSERA_FAMILY_FIXTURES where the
  // binary travelled without it (the GPU host: the repository copy's tests/data/families).
  const char* env = std::getenv("TESSERA_FAMILY_FIXTURES");
  const fs::path fixture = (env != nullptr ? fs::path(env) : testing::kFamilyFixtures) / "llama";
  if (!fs::exists(fixture / "hf")) {
    GTEST_SKIP() << fixture << " is not on this host (set TESSERA_FAMILY_FIXTURES)";
  }
  const fs::path tmp = fs::path(::testing::TempDir()) /
                       ("tessera_gpu_fp8_checkpoint_" + std::to_string(::getpid()));
  testing::write_fp8_checkpoints(tmp / "fp8", tmp / "dequant", /*per_tensor=*/false, fixture);
  if (HasFatalFailure()) return;
  std::unique_ptr<ModelInstance> fp8 = load_on_gpu(tmp / "fp8", Quantization::kFp8);
  std::unique_ptr<ModelInstance> twin = load_on_gpu(tmp / "dequant", Quantization::kNone);
  std::unique_ptr<ModelInstance> fp8_auto = load_on_gpu(tmp / "fp8", std::nullopt);
  std::unique_ptr<ModelInstance> twin_auto = load_on_gpu(tmp / "dequant", std::nullopt);
  ASSERT_TRUE(fp8 && twin && fp8_auto && twin_auto);
  EXPECT_EQ(fp8_auto->quantization(), Quantization::kFp8);
  EXPECT_EQ(twin_auto->quantization(), Quantization::kNone);
  EXPECT_EQ(fp8_auto->weight_bytes(), fp8->weight_bytes());
  // A byte and a row scale per linear weight: less than the twin's two bytes.
  EXPECT_LT(fp8->weight_bytes(), twin->weight_bytes());
  const auto cases = testing::read_family_cases(fixture, "cases");
  ASSERT_FALSE(cases.empty());
  int compared = 0;
  for (const testing::FamilyCase& c : cases) {
    if (c.prompt.size() > 16) continue;  // the FP8-weight kernels' sizes: exact weights
    ++compared;
    const double e = testing::rel_err(testing::prompt_logits(*fp8, c.prompt),
                                      testing::prompt_logits(*twin, c.prompt));
    EXPECT_LT(e, 5e-2) << c.prompt.size() << "-token prompt";
    EXPECT_EQ(testing::prompt_logits(*fp8_auto, c.prompt), testing::prompt_logits(*fp8, c.prompt))
        << c.prompt.size() << "-token prompt: auto is not the same FP8 model";
    std::printf("[ metric ] fp8 checkpoint on the GPU, %zu-token prompt: logits rel_err vs its "
                "dequantized twin in bf16 %.2e\n", c.prompt.size(), e);
  }
  EXPECT_GT(compared, 0) << "no fixture prompt of 16 tokens or fewer";
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

}  // namespace
}  // namespace tessera
