// The repository's default model, SmolLM2-135M-Instruct Q4_1 GGUF. Expected values were computed
// with gguf-py 0.19 (GGUFReader + gguf.quants.dequantize, then the inverse of the converter's
// q/k permutation: w.reshape(n_head, hd/2, 2, in).swapaxes(1, 2)).
#include <filesystem>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_io/gguf_weights.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

class DefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(TESSERA_DEFAULT_MODEL)) return;
    absl::StatusOr<std::unique_ptr<WeightSource>> w = open_weights(TESSERA_DEFAULT_MODEL);
    ASSERT_TRUE(w.ok()) << w.status();
    weights_ = w->release();
  }
  static void TearDownTestSuite() {
    delete weights_;
    weights_ = nullptr;
  }
  void SetUp() override {
    if (weights_ == nullptr) GTEST_SKIP() << TESSERA_DEFAULT_MODEL << " is missing";
  }

  static WeightSource* weights_;
};
WeightSource* DefaultModelTest::weights_ = nullptr;

TEST_F(DefaultModelTest, Config) {
  const ModelConfig& c = weights_->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(weights_->tensors().size(), 272u);
  EXPECT_FALSE(weights_->has("lm_head.weight"));
  const auto& gguf = dynamic_cast<const GgufWeights&>(*weights_).gguf();
  EXPECT_EQ(*gguf.get_array_size("tokenizer.ggml.tokens"), 49152u);
}

TEST_F(DefaultModelTest, EmbeddingsQ8_0) {
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor raw, weights_->raw("model.embed_tokens.weight"));
  EXPECT_EQ(raw.info.dtype, DType::kQ8_0);
  const int64_t shape[] = {49152, 576};
  std::vector<float> emb(49152 * 576);  // [vocab, hidden]
  ASSERT_TRUE(weights_->read_f32("model.embed_tokens.weight", shape, emb).ok());
  auto at = [&](int64_t r, int64_t c) { return emb[r * 576 + c]; };
  EXPECT_FLOAT_EQ(at(0, 0), -0.106544495f);
  EXPECT_FLOAT_EQ(at(0, 1), 0.0329780579f);
  EXPECT_FLOAT_EQ(at(1, 0), -0.0238037109f);
  EXPECT_FLOAT_EQ(at(1, 575), -0.128437042f);
  EXPECT_FLOAT_EQ(at(100, 7), -0.032661438f);
  EXPECT_FLOAT_EQ(at(12345, 300), -0.107906342f);
  EXPECT_FLOAT_EQ(at(49151, 0), 0.011505127f);
  EXPECT_FLOAT_EQ(at(49151, 575), -0.0417022705f);
}

TEST_F(DefaultModelTest, QAndKProjectionsQ4_1Unpermuted) {
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor raw,
                               weights_->raw("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(raw.info.dtype, DType::kQ4_1);
  EXPECT_TRUE(raw.qk_permuted);
  const int64_t qshape[] = {576, 576};
  std::vector<float> q(576 * 576);  // [n_heads * head_dim, hidden]
  ASSERT_TRUE(weights_->read_f32("model.layers.0.self_attn.q_proj.weight", qshape, q).ok());
  auto qa = [&](int64_t r, int64_t c) { return q[r * 576 + c]; };
  EXPECT_FLOAT_EQ(qa(0, 0), -0.0963134766f);
  EXPECT_FLOAT_EQ(qa(0, 1), 0.157348633f);
  EXPECT_FLOAT_EQ(qa(1, 0), -0.159179688f);  // stored row 1 holds -0.11730957 (HF row 32)
  EXPECT_FLOAT_EQ(qa(31, 5), -0.098449707f);
  EXPECT_FLOAT_EQ(qa(32, 5), 0.184692383f);
  EXPECT_FLOAT_EQ(qa(33, 5), -0.0628051758f);
  EXPECT_FLOAT_EQ(qa(63, 575), -0.0612487793f);
  EXPECT_FLOAT_EQ(qa(64, 0), 0.112670898f);
  EXPECT_FLOAT_EQ(qa(300, 123), -0.0412597656f);
  EXPECT_FLOAT_EQ(qa(575, 575), -0.255859375f);

  const int64_t kshape[] = {192, 576};
  std::vector<float> k(192 * 576);  // [n_kv_heads * head_dim, hidden]
  ASSERT_TRUE(weights_->read_f32("model.layers.0.self_attn.k_proj.weight", kshape, k).ok());
  auto ka = [&](int64_t r, int64_t c) { return k[r * 576 + c]; };
  EXPECT_FLOAT_EQ(ka(0, 0), -0.155273438f);
  EXPECT_FLOAT_EQ(ka(1, 0), 0.203369141f);
  EXPECT_FLOAT_EQ(ka(32, 0), 0.056640625f);
  EXPECT_FLOAT_EQ(ka(100, 200), -0.0708007812f);
  EXPECT_FLOAT_EQ(ka(191, 575), 0.363647461f);
}

TEST_F(DefaultModelTest, NormF32) {
  const int64_t shape[] = {576};
  std::vector<float> norm(576);
  ASSERT_TRUE(weights_->read_f32("model.norm.weight", shape, norm).ok());
  EXPECT_FLOAT_EQ(norm[0], 1.7578125f);
  EXPECT_FLOAT_EQ(norm[575], 1.984375f);
}

// Every tensor of the model converts with its own shape.
TEST_F(DefaultModelTest, EveryTensorReads) {
  std::vector<float> buf;
  for (const TensorInfo& t : weights_->tensors()) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    buf.resize(n);
    absl::Status st = weights_->read_f32(t.name, t.shape, buf);
    ASSERT_TRUE(st.ok()) << st;
  }
}

}  // namespace
}  // namespace tessera
