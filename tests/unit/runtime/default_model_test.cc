// The real default model (SmolLM2-135M-Instruct Q4_1) through the whole runtime: pinned greedy
// tokens (checked against transformers, docs/reference.md), and the batching machinery
// (chunked prefill, concurrent sequences) must not change a single token.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "runtime/model_instance.h"

namespace tessera {
namespace {

const char* kModel = TESSERA_DEFAULT_MODEL;

class DefaultModel : public ::testing::Test {
 protected:
  static std::unique_ptr<ModelInstance> load(int32_t max_batch_tokens) {
    InstanceOptions options;
    options.backend.threads = 1;
    options.limits.max_batch_tokens = max_batch_tokens;
    options.limits.max_logit_rows = 8;
    options.engine.max_num_seqs = 8;
    options.kv_cache_bytes = 64 << 20;
    auto inst = ModelInstance::load(kModel, options);
    EXPECT_TRUE(inst.ok()) << inst.status();
    return inst.ok() ? *std::move(inst) : nullptr;
  }

  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "default model missing: " << kModel;
  }

  static SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0;
    return p;
  }

  // Tokens for each prompt (greedy unless told), all submitted at once and stepped on this thread.
  static std::vector<std::vector<int32_t>> generate(ModelInstance& m, const std::vector<std::string>& prompts,
                                                    int32_t max_tokens,
                                                    const SamplingParams& sampling = greedy()) {
    std::vector<RequestHandle> handles;
    for (const std::string& p : prompts) {
      auto r = std::make_shared<Request>();
      r->prompt = *m.tokenizer().encode(p);
      r->sampling = sampling;
      r->stop.max_tokens = max_tokens;
      r->stop.ignore_eos = true;
      handles.push_back(*m.engine().submit(r));
    }
    std::vector<std::vector<int32_t>> out(prompts.size());
    size_t done = 0;
    while (done < prompts.size()) {
      m.engine().step();
      for (size_t i = 0; i < handles.size(); ++i) {
        while (auto o = handles[i].stream->try_next()) {
          out[i].insert(out[i].end(), o->token_ids.begin(), o->token_ids.end());
          if (o->finished) {
            EXPECT_TRUE(o->status.ok()) << o->status;
            ++done;
          }
        }
      }
    }
    return out;
  }
};

TEST_F(DefaultModel, GreedyTokensArePinned) {
  auto m = load(256);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().num_layers, 30);
  EXPECT_EQ(*m->tokenizer().encode("The capital of France is"),
            (std::vector<int32_t>{504, 3575, 282, 4649, 314}));
  // " Paris.\n\nThe answer is: 2018-01-" — the same 16 ids transformers produces.
  const std::vector<int32_t> expected = {7042, 30, 198, 198, 504, 2988, 314, 42,
                                         216,  34, 32, 33,  40,  29,   32,  33};
  EXPECT_EQ(generate(*m, {"The capital of France is"}, 16)[0], expected);
}

TEST_F(DefaultModel, ChunkedPrefillAndBatchingDoNotChangeTokens) {
  const std::vector<std::string> prompts = {
      "Once upon a time, in a small village by the sea, there lived an old fisherman who",
      "def quicksort(arr):",
      "The three primary colors are",
  };
  auto whole = load(512);
  ASSERT_NE(whole, nullptr);
  std::vector<std::vector<int32_t>> alone;
  for (const std::string& p : prompts) alone.push_back(generate(*whole, {p}, 12)[0]);
  whole.reset();
  // 7 tokens per step: prompts are cut into chunks, and decode steps share the batch with them.
  auto chunked = load(7);
  ASSERT_NE(chunked, nullptr);
  EXPECT_EQ(generate(*chunked, prompts, 12), alone);
}

TEST_F(DefaultModel, SeededSamplingIsTheSameOnTheDeviceAndOnTheHost) {
  const std::vector<std::string> prompts = {"Once upon a time", "The three primary colors are"};
  auto m = load(256);
  ASSERT_NE(m, nullptr);
  SamplingParams p;
  p.temperature = 1.1f;
  p.top_k = 100;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  p.seed = 2024;
  p.has_seed = true;
  // Plain rows: LlamaModel::forward_sampled, the backend's sample op.
  const auto device = generate(*m, prompts, 16, p);
  // Logprobs are the host Sampler's: every step goes through forward() and the host.
  p.logprobs = true;
  const auto host = generate(*m, prompts, 16, p);
  EXPECT_EQ(device, host);
  EXPECT_NE(device, generate(*m, prompts, 16));  // and it did sample, not decode greedily
}

TEST_F(DefaultModel, MissingFileAndDirectoryGiveClearErrors) {
  InstanceOptions options;
  auto missing = ModelInstance::load("/nonexistent/model.gguf", options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("/nonexistent/model.gguf"), std::string::npos);
  auto dir = ModelInstance::load(std::filesystem::temp_directory_path().string(), options);
  ASSERT_FALSE(dir.ok());
}

}  // namespace
}  // namespace tessera
