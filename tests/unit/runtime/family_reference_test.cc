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
#include "tests/unit/runtime/prompt_logits.h"

namespace tessera {
namespace {

using testing::prompt_logits;
using testing::rel_err;

const std::filesystem::path kFixtures = std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/data/families";

struct Case {
  std::vector<int32_t> prompt;
  std::vector<float> logits;      // [vocab] after the whole prompt
  std::vector<int32_t> greedy;    // transformers' greedy continuation, eos ignored
};

std::vector<Case> read_cases(const nlohmann::json& cases) {
  std::vector<Case> out;
  for (const auto& c : cases) {
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(),
                   c.at("logits").get<std::vector<float>>(),
                   c.at("greedy_ids").get<std::vector<int32_t>>()});
  }
  return out;
}

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


// Greedy tokens through the engine (prefill, then decode steps reading the paged cache).
std::vector<int32_t> greedy_tokens(ModelInstance& m, const std::vector<int32_t>& prompt, int32_t n) {
  auto r = std::make_shared<Request>();
  r->prompt = prompt;
  r->sampling.temperature = 0;
  r->stop.max_tokens = n;
  r->stop.ignore_eos = true;
  absl::StatusOr<RequestHandle> h = m.engine().submit(r);
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return {};
  std::vector<int32_t> out;
  for (bool finished = false; !finished;) {
    m.engine().step();
    while (auto o = h->stream->try_next()) {
      out.insert(out.end(), o->token_ids.begin(), o->token_ids.end());
      EXPECT_TRUE(o->status.ok()) << o->status;
      finished = finished || o->finished;
    }
  }
  return out;
}


class FamilyReference : public ::testing::TestWithParam<std::string> {
 protected:
  void check(const std::filesystem::path& model_path, const std::vector<Case>& cases) {
    absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(model_path, cpu_options());
    ASSERT_TRUE(m.ok()) << m.status();
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      const double e = rel_err(prompt_logits(**m, c.prompt), c.logits);
      EXPECT_LT(e, 1e-4) << model_path << " prompt " << i << " (" << c.prompt.size() << " tokens)";
      EXPECT_EQ(greedy_tokens(**m, c.prompt, static_cast<int32_t>(c.greedy.size())), c.greedy)
          << model_path << " prompt " << i;
      std::printf("[ metric ] family %s prompt %zu (%zu tokens) logits rel_err %.2e\n",
                  GetParam().c_str(), i, c.prompt.size(), e);
    }
  }
};

TEST_P(FamilyReference, HfDirectoryMatchesTransformers) {
  const std::filesystem::path dir = kFixtures / GetParam();
  std::ifstream in(dir / "expected.json");
  ASSERT_TRUE(in) << "missing " << dir / "expected.json";
  const nlohmann::json expected = nlohmann::json::parse(in);
  check(dir / "hf", read_cases(expected.at("cases")));
}

// The GGUF llama.cpp's converter made of the same weights. Where the file cannot express a
// feature of config.json (Mistral's and Qwen2's windows, Gemma's query_pre_attn_scalar), the
// expected outputs are transformers' for the model the file describes (gguf_cases).
TEST_P(FamilyReference, GgufFileMatchesTransformers) {
  const std::filesystem::path dir = kFixtures / GetParam();
  std::ifstream in(dir / "expected.json");
  ASSERT_TRUE(in) << "missing " << dir / "expected.json";
  const nlohmann::json expected = nlohmann::json::parse(in);
  check(dir / (GetParam() + ".gguf"), read_cases(expected.at("gguf_cases")));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyReference,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                                           "phi3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera
