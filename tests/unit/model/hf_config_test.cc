#include "runtime/model_io/hf_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPath = "/models/x/config.json";

// SmolLM2-135M-Instruct's config.json.
const char* kSmolLm2 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "eos_token_id": 2, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
  "is_llama_config": true, "max_position_embeddings": 8192, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
  "num_key_value_heads": 3, "pad_token_id": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.42.3",
  "use_cache": true, "vocab_size": 49152
})";

TEST(HfConfigTest, SmolLm2) {
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_from_hf_json(kSmolLm2, kPath));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, DefaultsForOptionalKeys) {
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c,
                               config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100, "head_dim": null, "num_key_value_heads": null})",
                                                   kPath));
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FALSE(c.tie_word_embeddings);
}

std::string with_rope(const std::string& rope) {
  return R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "rope_theta": 500000.0,
    "max_position_embeddings": 131072, "rope_scaling": )" +
         rope + "}";
}

TEST(HfConfigTest, Llama3RopeScaling) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c, config_from_hf_json(with_rope(R"({"factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
        "rope_type": "llama3"})"),
                                         kPath));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.head_dim, 128);

  absl::Status st =
      config_from_hf_json(with_rope(R"({"factor": 8.0, "rope_type": "llama3"})"), kPath).status();
  EXPECT_THAT(st.message(), HasSubstr(kPath));
  EXPECT_THAT(st.message(), HasSubstr("'rope_scaling.low_freq_factor' is missing"));
}

TEST(HfConfigTest, OtherRopeScalingTypes) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c, config_from_hf_json(with_rope(R"({"type": "linear", "factor": 2})"), kPath));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 2.0f);

  TESSERA_ASSERT_OK_AND_ASSIGN(
      c, config_from_hf_json(with_rope(R"({"rope_type": "default"})"), kPath));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  TESSERA_ASSERT_OK_AND_ASSIGN(c, config_from_hf_json(with_rope("null"), kPath));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);

  absl::Status st =
      config_from_hf_json(with_rope(R"({"rope_type": "longrope", "factor": 4})"), kPath).status();
  EXPECT_THAT(st.message(),
              HasSubstr("'rope_scaling.rope_type' is 'longrope', which is not supported"));
  st = config_from_hf_json(with_rope(R"({"rope_type": "yarn", "factor": 4, "mscale": 1})"), kPath)
           .status();
  EXPECT_THAT(st.message(), HasSubstr("'rope_scaling.mscale' (DeepSeek's yarn) is not supported"));
  st = config_from_hf_json(with_rope("[1]"), kPath).status();
  EXPECT_THAT(st.message(), HasSubstr("'rope_scaling' must be an object or null, got array"));
}

// transformers 5 moves rope_theta and the scaling into rope_parameters.
TEST(HfConfigTest, RopeParameters) {
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c,
                               config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "linear",
        "factor": 3.0}})",
                                                   kPath));
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 3.0f);
}

TEST(HfConfigTest, MissingAndIllTypedKeysAreNamed) {
  absl::Status st = config_from_hf_json(R"({"model_type": "llama", "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})",
                                        kPath)
                        .status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(kPath));
  EXPECT_THAT(st.message(), HasSubstr("'hidden_size' is missing"));

  st = config_from_hf_json(R"({"model_type": "llama", "hidden_size": "576",
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100})",
                           kPath)
           .status();
  EXPECT_THAT(st.message(), HasSubstr("'hidden_size' must be an integer, got string \"576\""));

  st = config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64.5,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100})",
                           kPath)
           .status();
  EXPECT_THAT(st.message(), HasSubstr("'hidden_size' must be an integer, got number 64.5"));

  st = config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100, "tie_word_embeddings": "yes"})",
                           kPath)
           .status();
  EXPECT_THAT(st.message(), HasSubstr("'tie_word_embeddings' must be true or false"));

  st = config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 3, "vocab_size": 100})",
                           kPath)
           .status();
  EXPECT_THAT(st.message(),
              HasSubstr("invalid model config: num_kv_heads: 3 does not divide num_heads 4"));
}

TEST(HfConfigTest, UnsupportedArchitecture) {
  absl::Status st = config_from_hf_json(R"({"architectures": ["MambaForCausalLM"],
      "model_type": "mamba", "hidden_size": 64})",
                                        kPath)
                        .status();
  EXPECT_THAT(st.message(), HasSubstr(kPath));
  EXPECT_THAT(st.message(), HasSubstr("[MambaForCausalLM] / model_type 'mamba' is not a supported"));
  EXPECT_THAT(st.message(), HasSubstr("Gemma2ForCausalLM (gemma2)"));
  st = config_from_hf_json(R"({"architectures": "LlamaForCausalLM"})", kPath).status();
  EXPECT_THAT(st.message(), HasSubstr("'architectures' must be an array of strings"));
}

TEST(HfConfigTest, MalformedJsonIsAStatusNotAnException) {
  for (const char* text : {"", "{", "[1, 2]", "{\"a\": }", "\xff\xfe", "null"}) {
    absl::StatusOr<ModelConfig> c = config_from_hf_json(text, kPath);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_THAT(c.status().message(), HasSubstr(kPath));
  }
}

TEST(HfConfigTest, FromFile) {
  testing::TempDir dir;
  const std::string path = dir.write("config.json", kSmolLm2);
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_from_hf_file(path));
  EXPECT_EQ(c.num_layers, 30);
  absl::Status st = config_from_hf_file(dir.path("nope.json")).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(dir.path("nope.json")));
}

}  // namespace
}  // namespace tessera
