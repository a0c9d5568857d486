// Every family's forward against transformers on the same weights: small random-weight models of
// each family (every feature of the architecture description switched on, sliding windows shorter
// than the prompts), made and run by tests/reference/make_family_fixtures.py, which stored
// transformers' fp32 logits after each prompt and its 64 greedy tokens beside the model files
// (tests/data/families/<family>/). tessera's CPU backend computes in fp32: the logits must agree
// to 1e-4 relative error and the greedy tokens exactly, from the HF directory and from the GGUF
// file llama.cpp's converter made of it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model_instance.h"
#include "tests/unit/runtime/family_fixtures.h"

namespace tessera {
namespace {

using testing::FamilyCase;
using testing::greedy_tokens;
using testing::kFamilyFixtures;
using testing::prompt_logits;
using testing::read_family_cases;
using testing::rel_err;

InstanceOptions cpu_options() {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.backend.threads = 1;
  options.limits.max_batch_tokens = 512;
  options.limits.max_logit_rows = 8;
  options.engine.max_num_seqs = 8;
  options.kv_cache_bytes = 16 << 20;
  return options;
}

class FamilyReference : public ::testing::TestWithParam<std::string> {
 protected:
  void check(const std::filesystem::path& model_path, const std::vector<FamilyCase>& cases) {
    ASSERT_FALSE(cases.empty());
    absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(model_path, cpu_options());
    ASSERT_TRUE(m.ok()) << m.status();
    for (size_t i = 0; i < cases.size(); ++i) {
      const FamilyCase& c = cases[i];
      const double e = rel_err(prompt_logits(**m, c.prompt), c.logits);
      EXPECT_LT(e, 1e-4) << model_path << " prompt " << i << " (" << c.prompt.size() << " tokens)";
      // Each prompt alone (the tensor-parallel test runs them as one batch).
      EXPECT_EQ(greedy_tokens(**m, {c}), std::vector<std::vector<int32_t>>{c.greedy})
          << model_path << " prompt " << i;
      std::printf("[ metric ] family %s prompt %zu (%zu tokens) logits rel_err %.2e\n",
                  GetParam().c_str(), i, c.prompt.size(), e);
    }
  }
};

TEST_P(FamilyReference, HfDirectoryMatchesTransformers) {
  const std::filesystem::path dir = kFamilyFixtures / GetParam();
  check(dir / "hf", read_family_cases(dir, "cases"));
}

// The GGUF llama.cpp's converter made of the same weights. Where the file cannot express a
// feature of config.json (Mistral's and Qwen2's windows, Gemma's query_pre_attn_scalar), the
// expected outputs are transformers' for the model the file describes (gguf_cases).
TEST_P(FamilyReference, GgufFileMatchesTransformers) {
  const std::filesystem::path dir = kFamilyFixtures / GetParam();
  check(dir / (GetParam() + ".gguf"), read_family_cases(dir, "gguf_cases"));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyReference,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                                           "phi3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
