#include "runtime/model_io/gguf_config.h"

#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model_io/gguf_file.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TinyLlama;

class GgufConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<ModelConfig> config_of(const GgufBuilder& b, std::string_view name = "c.gguf") {
    path_ = dir_.write(name, b.build());
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(path_);
    if (!f.ok()) return f.status();
    return config_from_gguf(**f);
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(GgufConfigTest, ReadsLlamaHyperParameters) {
  TinyLlama p;
  p.layers = 3;
  p.hidden = 16;
  p.ffn = 40;
  p.heads = 4;
  p.kv_heads = 2;
  p.vocab = 10;
  p.context = 2048;
  GgufBuilder b;
  testing::add_llama_metadata(b, p);
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(b));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.num_layers, 3);
  EXPECT_EQ(c.hidden_size, 16);
  EXPECT_EQ(c.intermediate_size, 40);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
}

TEST_F(GgufConfigTest, UntiedWhenOutputWeightPresent) {
  TinyLlama p;
  p.tied = false;
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(testing::tiny_llama_gguf(p)));
  EXPECT_FALSE(c.tie_word_embeddings);
}

TEST_F(GgufConfigTest, DefaultsAndFallbacks) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 128)
      .kv_u32("llama.embedding_length", 64)
      .kv_u32("llama.feed_forward_length", 128)
      .kv_u32("llama.attention.head_count", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_u32("llama.attention.key_length", 16)  // head_dim 16 although hidden / heads = 32
      .kv_u32("llama.rope.dimension_count", 16)
      .kv_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(b));
  EXPECT_EQ(c.num_kv_heads, 2);  // head_count_kv defaults to head_count
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.vocab_size, 3);  // from the tokens array
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
}

TEST_F(GgufConfigTest, UnknownArchitectureListsSupported) {
  GgufBuilder b;
  b.kv_string("general.architecture", "mamba");
  absl::Status st = config_of(b, "mamba.gguf").status();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr("'mamba' is not supported in GGUF files (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3;"));
}

TEST_F(GgufConfigTest, MissingOrIllTypedKeysAreNamed) {
  GgufBuilder missing;
  missing.kv_string("general.architecture", "llama").kv_u32("llama.embedding_length", 8);
  absl::Status st = config_of(missing, "missing.gguf").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr("'llama.block_count' is missing"));

  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 128)
      .kv_string("llama.embedding_length", "576")
      .kv_u32("llama.feed_forward_length", 128)
      .kv_u32("llama.attention.head_count", 2)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  st = config_of(b, "typed.gguf").status();
  EXPECT_THAT(st.message(), HasSubstr("'llama.embedding_length' has type string"));
  EXPECT_THAT(st.message(), HasSubstr(path_));
}

TEST_F(GgufConfigTest, InvalidValuesFailValidation) {
  TinyLlama p;
  p.heads = 4;
  p.kv_heads = 3;
  p.hidden = 16;
  GgufBuilder b;
  testing::add_llama_metadata(b, p);
  absl::Status st = config_of(b).status();
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr("num_kv_heads: 3 does not divide num_heads 4"));
}

TEST_F(GgufConfigTest, PartialRotaryIsRejected) {
  TinyLlama p;
  GgufBuilder b;
  testing::add_llama_metadata(b, p);
  b.kv_u32("llama.rope.dimension_count", 2);
  EXPECT_THAT(config_of(b).status().message(), HasSubstr("partial rotary"));
}

TEST_F(GgufConfigTest, LinearRopeScaling) {
  GgufBuilder b;
  testing::add_llama_metadata(b, TinyLlama{});
  b.kv_string("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 4.0f);
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(b));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 4.0f);

  GgufBuilder yarn;
  testing::add_llama_metadata(yarn, TinyLlama{});
  yarn.kv_string("llama.rope.scaling.type", "longrope").kv_f32("llama.rope.scaling.factor", 4.0f);
  EXPECT_THAT(config_of(yarn, "longrope.gguf").status().message(),
              HasSubstr("'llama.rope.scaling.type' is 'longrope', which is not supported"));
}

// rope_freqs as the GGUF converter writes it for Llama 3.x (generate_extra_tensors).
std::vector<float> llama3_rope_freqs(int head_dim, float theta, float factor, float low, float high,
                                     float orig) {
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq =
        1.0 / std::pow(static_cast<double>(theta), static_cast<double>(i) / head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    const double low_wavelen = orig / low, high_wavelen = orig / high;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const double smooth = (orig / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

GgufBuilder llama3_builder(float factor, float orig, const std::vector<float>* freqs = nullptr) {
  TinyLlama p;
  p.hidden = 256;
  p.heads = 2;
  p.kv_heads = 1;
  p.context = 131072;
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", p.context)
      .kv_u32("llama.embedding_length", p.hidden)
      .kv_u32("llama.feed_forward_length", 512)
      .kv_u32("llama.attention.head_count", p.heads)
      .kv_u32("llama.attention.head_count_kv", p.kv_heads)
      .kv_f32("llama.rope.freq_base", 500000.0f)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_u32("llama.vocab_size", 8)
      .kv_u32("llama.rope.dimension_count", 128);
  const std::vector<float> f =
      freqs != nullptr ? *freqs : llama3_rope_freqs(128, 500000.0f, factor, 1.0f, 4.0f, orig);
  b.f32_tensor("rope_freqs.weight", {f.size()}, f);
  return b;
}

TEST_F(GgufConfigTest, Llama3RopeScalingRecoveredFromRopeFreqs) {
  // Llama 3.1 (factor 8) and 3.2 (factor 32), both with original context 8192.
  for (float factor : {8.0f, 32.0f}) {
    SCOPED_TRACE(factor);
    TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(llama3_builder(factor, 8192.0f)));
    EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
    EXPECT_FLOAT_EQ(c.rope_scaling.factor, factor);
    EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
    EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  }
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(llama3_builder(4.0f, 4096.0f), "o.gguf"));
  EXPECT_EQ(c.rope_scaling.original_max_position, 4096);
}

TEST_F(GgufConfigTest, RopeFreqsThatAreNotLlama3AreRejected) {
  std::vector<float> f = llama3_rope_freqs(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192.0f);
  f[3] = 5.0f;  // a high-frequency pair scaled: no llama3 parameters give this
  absl::Status st = config_of(llama3_builder(8, 8192, &f)).status();
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr("tensor 'rope_freqs.weight': entry"));

  std::vector<float> wrong_size(10, 1.0f);
  EXPECT_THAT(config_of(llama3_builder(8, 8192, &wrong_size), "n.gguf").status().message(),
              HasSubstr("expected shape [64]"));

  std::vector<float> ones(64, 1.0f);  // no scaling at all
  TESSERA_ASSERT_OK_AND_ASSIGN(ModelConfig c, config_of(llama3_builder(8, 8192, &ones), "1.gguf"));
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
}

}  // namespace
}  // namespace tessera
