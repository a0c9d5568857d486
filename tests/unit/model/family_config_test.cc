// The architecture description read from each family's config.json, with transformers' defaults
// where a key is absent, and an error naming every key whose value changes the math in a way
// tessera does not compute.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model_io/hf_config.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kPath = "/models/f/config.json";

// A small config of `model_type` with `extra` keys (a JSON object's members, leading comma).
std::string config(const std::string& model_type, const std::string& extra = "") {
  return R"({"model_type": ")" + model_type +
         R"(", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
             "max_position_embeddings": 256)" +
         extra + "}";
}

TEST(FamilyConfig, LlamaShapedFamiliesKeepLlamasMath) {
  for (const std::string family : {"llama", "mistral", "qwen2", "qwen3", "phi3"}) {
    TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_from_hf_json(config(family), kPath));
    EXPECT_EQ(c.architecture, family);
    EXPECT_EQ(c.activation, Activation::kSilu) << family;
    EXPECT_FALSE(c.sandwich_norms) << family;
    EXPECT_EQ(c.norm_weight_offset, 0.0f) << family;
    EXPECT_EQ(c.embedding_scale, 1.0f) << family;
    EXPECT_EQ(c.sliding_window, 0) << family;
    EXPECT_EQ(c.qkv_bias, family == "qwen2") << family;
    EXPECT_EQ(c.qk_norm, family == "qwen3") << family;
  }
}

TEST(FamilyConfig, MistralSlidesEveryLayer) {
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c,
                               config_from_hf_json(config("mistral", R"(, "sliding_window": 32)"), kPath));
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_THAT(c.sliding_layers, ElementsAre(true, true, true, true));
  TESSERA_ASSERT_OK_AND_ASSIGN(c, config_from_hf_json(config("mistral", R"(, "sliding_window": null)"), kPath));
  EXPECT_EQ(c.sliding_window, 0);
}

TEST(FamilyConfig, Qwen2SlidesOnlyWhenAskedAndFromMaxWindowLayers) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c, config_from_hf_json(config("qwen2", R"(, "sliding_window": 32)"), kPath));
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window defaults to false
  TESSERA_ASSERT_OK_AND_ASSIGN(
      c, config_from_hf_json(config("qwen2", R"(, "sliding_window": 32, "use_sliding_window": true,
                                               "max_window_layers": 2)"),
                             kPath));
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_THAT(c.sliding_layers, ElementsAre(false, false, true, true));
}

TEST(FamilyConfig, Gemma2Defaults) {
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_from_hf_json(config("gemma2"), kPath));
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_EQ(c.norm_weight_offset, 1.0f);
  EXPECT_TRUE(c.sandwich_norms);
  EXPECT_EQ(c.activation, Activation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);  // sqrt(64)
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.attn_logit_softcap, 50.0f);
  EXPECT_EQ(c.final_logit_softcap, 30.0f);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0f);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_THAT(c.sliding_layers, ElementsAre(true, false, true, false));
  TESSERA_ASSERT_OK_AND_ASSIGN(
      c, config_from_hf_json(config("gemma2", R"(, "final_logit_softcapping": null, "head_dim": 16,
                                                "layer_types": ["full_attention", "sliding_attention",
                                                "full_attention", "sliding_attention"])"),
                             kPath));
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_THAT(c.sliding_layers, ElementsAre(false, true, false, true));
}

TEST(FamilyConfig, Gemma3TextHasLocalLayersWithTheirOwnTheta) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c,
      config_from_hf_json(config("gemma3_text", R"(, "sliding_window": 16, "sliding_window_pattern": 2,
                                                    "rope_local_base_freq": 5000)"),
                          kPath));
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.attn_logit_softcap, 0.0f);
  EXPECT_EQ(c.rope_local_theta, 5000.0f);
  EXPECT_THAT(c.sliding_layers, ElementsAre(true, false, true, false));
}

TEST(FamilyConfig, YarnRopeScaling) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c,
      config_from_hf_json(config("qwen2", R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                              "original_max_position_embeddings": 64})"),
                          kPath));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kYarn);
  EXPECT_EQ(c.rope_scaling.factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 64);
  EXPECT_EQ(c.rope_scaling.beta_fast, 32.0f);
}

// Keys that change the math in ways tessera does not compute are errors naming the key.
TEST(FamilyConfig, MathChangingKeysItCannotHonourAreNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {config("llama", R"(, "attention_bias": true)"), "'attention_bias'"},
      {config("llama", R"(, "mlp_bias": true)"), "'mlp_bias'"},
      {config("qwen3", R"(, "attention_bias": true)"), "'attention_bias'"},
      {config("phi3", R"(, "partial_rotary_factor": 0.75)"), "'partial_rotary_factor'"},
      {config("phi3", R"(, "rope_scaling": {"type": "longrope", "factor": 2})"), "'longrope'"},
      {config("llama", R"(, "hidden_act": "relu")"), "'hidden_act' is 'relu'"},
      {config("gemma2", R"(, "hidden_activation": "gelu_exact")"), "'hidden_activation'"},
      {config("qwen2", R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2, "truncate": false})"),
       "truncate"},
  };
  for (const auto& [json, key] : cases) {
    const absl::Status st = config_from_hf_json(json, kPath).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_THAT(st.message(), HasSubstr(key)) << json;
    EXPECT_THAT(st.message(), HasSubstr(kPath)) << json;
  }
}

}  // namespace
}  // namespace tessera
