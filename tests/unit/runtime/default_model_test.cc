// The real default model (SmolLM2-135M-Instruct Q4_1) through the whole runtime: pinned greedy
// tokens (checked against transformers, docs/reference.md), and the batching machinery
// (chunked prefill, concurrent sequences) must not change a single token.
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>

#include "tests/unit/runtime/default_model_fixture.h"

namespace tessera {
namespace {

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

// FP8 weights need FP8 tensor cores: the CPU backend refuses them at start, naming itself and
// the key, before a weight is read.
TEST_F(DefaultModel, Fp8QuantizationIsRefusedOnTheCpu) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.quantization = Quantization::kFp8;
  auto m = ModelInstance::load(TESSERA_DEFAULT_MODEL, options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  const std::string message(m.status().message());
  EXPECT_NE(message.find("quantization: fp8"), std::string::npos) << message;
  EXPECT_NE(message.find("cpu"), std::string::npos) << message;
  EXPECT_EQ(*parse_quantization("auto"), std::nullopt);
  EXPECT_EQ(*parse_quantization(""), std::nullopt);
  EXPECT_EQ(*parse_quantization("none"), Quantization::kNone);
  EXPECT_EQ(*parse_quantization("fp8"), Quantization::kFp8);
  EXPECT_FALSE(parse_quantization("int4").ok());
}

// quantization_keep naming a layer the model does not have is refused at start, naming the entry
// and the layer count.
TEST_F(DefaultModel, QuantizationKeepPastTheLastLayerIsRefused) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.quantization_keep = *QuantizationKeep::parse("down,layers.30");
  auto m = ModelInstance::load(TESSERA_DEFAULT_MODEL, options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  EXPECT_NE(std::string(m.status().message()).find("\"layers.30\" names layer 30; the model has 30"),
            std::string::npos)
      << m.status();
}

// A max_model_len past the model's positions (tesserad's key, `tessera perplexity --context`) is
// refused before any weight is read, naming both numbers.
TEST_F(DefaultModel, MaxModelLenPastTheModelsPositionsIsRefused) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.engine.max_model_len = 8193;
  auto m = ModelInstance::load(TESSERA_DEFAULT_MODEL, options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  EXPECT_NE(std::string(m.status().message())
                .find("max_model_len 8193 exceeds the model's 8192 positions"),
            std::string::npos)
      << m.status();
  options.engine.max_model_len = 8192;
  options.kv_cache_bytes = 64 << 20;
  EXPECT_TRUE(ModelInstance::load(TESSERA_DEFAULT_MODEL, options).ok());
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
