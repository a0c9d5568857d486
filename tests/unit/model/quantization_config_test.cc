// config.json quantization_config: the FP8 checkpoints' two flavours ("fp8" per-tensor/channel and
// block-wise, "compressed-tensors" float-quantized) parse into ModelConfig::quantization, and
// every other method or math-changing setting is refused naming the key and its value.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model_io/hf_config.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kPath = "/models/x/config.json";
using Q = WeightQuantization;

// A Llama 3 8B config.json with `quant` as its quantization_config.
std::string with_quant(const std::string& quant) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "quantization_config": )" +
         quant + "}";
}

absl::StatusOr<WeightQuantization> parse(const std::string& quant) {
  absl::StatusOr<ModelConfig> c = config_from_hf_json(with_quant(quant), kPath);
  if (!c.ok()) return c.status();
  return c->quantization;
}

std::string error(const std::string& quant) {
  absl::StatusOr<WeightQuantization> q = parse(quant);
  EXPECT_FALSE(q.ok()) << quant << " parsed";
  if (q.ok()) return "";
  EXPECT_THAT(q.status().message(), HasSubstr(kPath));
  return std::string(q.status().message());
}

TEST(QuantizationConfigTest, AbsentOrNullIsUnquantized) {
  TESSERA_ASSERT_OK_AND_ASSIGN(WeightQuantization q, parse("null"));
  EXPECT_FALSE(q.quantized());
  EXPECT_EQ(q.method, Q::Method::kNone);
}

// AutoFP8 / neuralmagic "...-FP8" checkpoints: per-tensor weight_scale, static input_scale.
TEST(QuantizationConfigTest, Fp8PerTensorStatic) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      WeightQuantization q,
      parse(R"({"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]})"));
  EXPECT_EQ(q.method, Q::Method::kFp8);
  EXPECT_EQ(quantization_method_name(q.method), "fp8");
  EXPECT_EQ(q.scale_suffix, "weight_scale");
  EXPECT_TRUE(q.per_tensor);
  EXPECT_TRUE(q.per_channel);
  EXPECT_EQ(q.block_rows, 0);
  EXPECT_EQ(q.activations, Q::Activations::kStatic);
  EXPECT_THAT(q.ignore, ElementsAre("lm_head"));

  TESSERA_ASSERT_OK_AND_ASSIGN(q, parse(R"({"quant_method": "fp8"})"));
  EXPECT_EQ(q.activations, Q::Activations::kDynamic);  // vLLM's default
}

// transformers' FineGrainedFP8 / DeepSeek-V3 / Qwen3-FP8: 128x128 blocks, weight_scale_inv.
TEST(QuantizationConfigTest, Fp8BlockWise) {
  TESSERA_ASSERT_OK_AND_ASSIGN(
      WeightQuantization q,
      parse(R"({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
                "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]})"));
  EXPECT_EQ(q.method, Q::Method::kFp8);
  EXPECT_EQ(q.scale_suffix, "weight_scale_inv");
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_FALSE(q.per_tensor);
  EXPECT_FALSE(q.per_channel);
  EXPECT_EQ(q.activations, Q::Activations::kDynamic);
  EXPECT_THAT(q.ignore, ElementsAre("lm_head"));
}

// RedHatAI "...-FP8-dynamic": compressed-tensors, per-channel weights, dynamic per-token inputs.
constexpr const char* kCompressedDynamic = R"({
  "quant_method": "compressed-tensors", "format": "float-quantized",
  "quantization_status": "compressed", "global_compression_ratio": 1.46,
  "config_groups": {"group_0": {
    "targets": ["Linear"],
    "weights": {"num_bits": 8, "type": "float", "symmetric": true, "strategy": "channel",
                "dynamic": false, "group_size": null, "block_structure": null, "actorder": null,
                "observer": "minmax", "observer_kwargs": {}},
    "input_activations": {"num_bits": 8, "type": "float", "symmetric": true, "strategy": "token",
                          "dynamic": true, "observer": null},
    "output_activations": null}},
  "ignore": ["lm_head"], "kv_cache_scheme": null, "sparsity_config": {}})";

TEST(QuantizationConfigTest, CompressedTensorsChannelDynamic) {
  TESSERA_ASSERT_OK_AND_ASSIGN(WeightQuantization q, parse(kCompressedDynamic));
  EXPECT_EQ(q.method, Q::Method::kCompressedTensors);
  EXPECT_EQ(quantization_method_name(q.method), "compressed-tensors");
  EXPECT_EQ(q.scale_suffix, "weight_scale");
  EXPECT_TRUE(q.per_channel);
  EXPECT_FALSE(q.per_tensor);
  EXPECT_EQ(q.activations, Q::Activations::kDynamic);
  EXPECT_EQ(q.activation_strategy, "token");
  EXPECT_THAT(q.ignore, ElementsAre("lm_head"));
  EXPECT_FALSE(q.kv_cache_scales);
}

TEST(QuantizationConfigTest, CompressedTensorsTensorStaticAndBlocks) {
  TESSERA_ASSERT_OK_AND_ASSIGN(WeightQuantization q, parse(R"({
    "quant_method": "compressed-tensors", "format": "naive-quantized",
    "config_groups": {"g": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false}}},
    "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false}})"));
  EXPECT_TRUE(q.per_tensor);
  EXPECT_EQ(q.activations, Q::Activations::kStatic);
  EXPECT_TRUE(q.kv_cache_scales);
  EXPECT_TRUE(q.ignore.empty());

  // Weight-only, block-wise (llm-compressor's FP8_BLOCK), under the older key name.
  TESSERA_ASSERT_OK_AND_ASSIGN(
      ModelConfig c, config_from_hf_json(R"({"model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "vocab_size": 100, "compression_config": {"quant_method": "compressed-tensors",
        "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float", "strategy": "block",
        "block_structure": [128, 64]}, "input_activations": null}}}})",
                                         kPath));
  EXPECT_EQ(c.quantization.method, Q::Method::kCompressedTensors);
  EXPECT_EQ(c.quantization.block_rows, 128);
  EXPECT_EQ(c.quantization.block_cols, 64);
  EXPECT_EQ(c.quantization.activations, Q::Activations::kNone);
}

TEST(QuantizationConfigTest, OtherMethodsAreRefusedNamingKeyAndValue) {
  for (const char* method : {"gptq", "awq", "bitsandbytes", "aqlm", "hqq", "mxfp4"}) {
    EXPECT_THAT(error(std::string(R"({"quant_method": ")") + method + R"(", "bits": 4})"),
                HasSubstr(std::string("key 'quantization_config.quant_method' is \"") + method +
                          "\"; tessera loads only FP8 checkpoints"));
  }
  EXPECT_THAT(error(R"({"bits": 4})"), HasSubstr("key 'quantization_config.quant_method' is missing"));
  EXPECT_THAT(error("[1]"), HasSubstr("key 'quantization_config' must be an object, got array"));
}

TEST(QuantizationConfigTest, MathChangingSettingsAreRefused) {
  EXPECT_THAT(error(R"({"quant_method": "fp8", "activation_scheme": "per_group"})"),
              HasSubstr("key 'quantization_config.activation_scheme' is \"per_group\"; supported"));
  EXPECT_THAT(error(R"({"quant_method": "fp8", "weight_block_size": [128]})"),
              HasSubstr("key 'quantization_config.weight_block_size' must be [rows, columns]"));
  EXPECT_THAT(error(R"({"quant_method": "fp8", "fmt": "e5m2x"})"),
              HasSubstr("key 'quantization_config.fmt' is \"e5m2x\""));

  auto ct = [](const std::string& weights, const std::string& extra = "") {
    return R"({"quant_method": "compressed-tensors", "format": "float-quantized",
               "config_groups": {"group_0": {"weights": )" +
           weights + "}}" + extra + "}";
  };
  const std::string fp8_channel = R"({"num_bits": 8, "type": "float", "strategy": "channel"})";
  // W8A8-INT8 and W4A16 checkpoints.
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "int", "strategy": "channel"})")),
              AllOf(HasSubstr("key 'quantization_config.config_groups.group_0.weights' is {"),
                    HasSubstr("8-bit int weights are not supported (only 8-bit float, FP8)")));
  EXPECT_THAT(error(ct(R"({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128})")),
              HasSubstr("4-bit int weights are not supported"));
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "float", "strategy": "group"})")),
              HasSubstr("'quantization_config.config_groups.group_0.weights.strategy' is \"group\""));
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "float", "strategy": "block"})")),
              HasSubstr("'quantization_config.config_groups.group_0.weights.block_structure' is missing"));
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": false})")),
              HasSubstr("'quantization_config.config_groups.group_0.weights.symmetric' is false"));
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": true})")),
              HasSubstr("'quantization_config.config_groups.group_0.weights.dynamic' is true"));
  // A missing strategy is named, not reported as a JSON library exception.
  EXPECT_THAT(error(ct(R"({"num_bits": 8, "type": "float"})")),
              HasSubstr("key 'quantization_config.config_groups.group_0.weights.strategy' is missing"));
  EXPECT_THAT(error(ct("null")),
              HasSubstr("key 'quantization_config.config_groups.group_0.weights' is missing"));
  EXPECT_THAT(
      error(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}})"),
      HasSubstr("key 'quantization_config.format' is \"pack-quantized\"; supported"));
  EXPECT_THAT(error(ct(fp8_channel, R"(, "sparsity_config": {"format": "sparse-24-bitmask"})")),
              HasSubstr("'quantization_config.sparsity_config' is {\"format\":\"sparse-24-bitmask\"}"));
  EXPECT_THAT(error(ct(fp8_channel, R"(, "transform_config": {"config_groups": {}})")),
              HasSubstr("'quantization_config.transform_config' is"));
  EXPECT_THAT(error(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                "input_activations": {"num_bits": 8, "type": "int", "dynamic": true}}}})"),
              HasSubstr("8-bit int activations are not supported"));
  EXPECT_THAT(error(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
                "output_activations": {"num_bits": 8, "type": "float"}}}})"),
              HasSubstr("'quantization_config.config_groups.g.output_activations' is"));
  EXPECT_THAT(error(R"({"quant_method": "compressed-tensors"})"),
              HasSubstr("key 'quantization_config.config_groups' is missing"));
  // A sparsity_config that says the weights are dense is fine.
  EXPECT_TRUE(parse(ct(fp8_channel, R"(, "sparsity_config": {"format": "dense"})")).ok());
}

}  // namespace
}  // namespace tessera
