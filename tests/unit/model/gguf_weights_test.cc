#include "runtime/model_io/gguf_weights.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model_io/dequant.h"
#include "base/half.h"
#include "tests/unit/model/gguf_builder.h"
#include "tests/unit/model/read_weights.h"

namespace tessera {
namespace {

using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TinyLlama;

// Worked by hand from the converter's w.reshape(n_head, 2, hd/2, in).swapaxes(1, 2): stored row
// h*hd + 2j + t holds HF row h*hd + t*hd/2 + j.
TEST(QkPermutationTest, HandComputedRows) {
  // head_dim 4: stored rows 0..3 hold HF rows 0, 2, 1, 3.
  const int64_t hd4[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int64_t s = 0; s < 8; ++s) EXPECT_EQ(qk_unpermuted_row(s, 4), hd4[s]) << s;
  // head_dim 6: stored rows hold HF rows 0, 3, 1, 4, 2, 5.
  const int64_t hd6[] = {0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11};
  for (int64_t s = 0; s < 12; ++s) EXPECT_EQ(qk_unpermuted_row(s, 6), hd6[s]) << s;
}

using testing::read_all;

class GgufWeightsTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

// tiny_llama_gguf fills tensor k with k * 1000 + element index; with hidden 8, heads 2, kv 1 the
// head_dim is 4, q has 8 rows of 8 and k has 4 rows of 8.
TEST_F(GgufWeightsTest, QAndKRowsAreUnpermutedOthersUntouched) {
  TinyLlama p;
  const std::string path = dir_.write("tiny.gguf", testing::tiny_llama_gguf(p).build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, GgufWeights::open(path));
  const std::vector<float> q = read_all(*w, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q.size(), 64u);
  const int q_index = 2;  // token_embd, attn_norm, attn_q
  const int stored_row_of_hf_row[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(q[r * 8 + c], q_index * 1000 + stored_row_of_hf_row[r] * 8 + c) << r << "," << c;
    }
  }
  const std::vector<float> k = read_all(*w, "model.layers.0.self_attn.k_proj.weight");
  ASSERT_EQ(k.size(), 32u);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 8; ++c) {
      EXPECT_EQ(k[r * 8 + c], 3 * 1000 + stored_row_of_hf_row[r] * 8 + c);
    }
  }
  const std::vector<float> v = read_all(*w, "model.layers.0.self_attn.v_proj.weight");
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 4 * 1000 + static_cast<float>(i));
  const std::vector<float> emb = read_all(*w, "model.embed_tokens.weight");
  ASSERT_EQ(emb.size(), 32u);  // [vocab 4, hidden 8]
  EXPECT_EQ(emb[9], 9.0f);
}

// Multi-head k with more kv heads, quantized: each stored row is dequantized into its HF row.
TEST_F(GgufWeightsTest, QuantizedKWithSeveralHeads) {
  TinyLlama p;
  p.hidden = 32;
  p.heads = 4;
  p.kv_heads = 4;  // head_dim 8, k has 32 rows
  GgufBuilder b;
  testing::add_llama_metadata(b, p);
  std::string q8;  // 32 rows x 1 Q8_0 block: row s has scale 1 and quants s, s+1, ...
  for (int s = 0; s < 32; ++s) {
    testing::put_le<uint16_t>(q8, float_to_half(1.0f));
    for (int j = 0; j < 32; ++j) q8.push_back(static_cast<char>(s + j));
  }
  b.tensor("blk.0.attn_k.weight", /*Q8_0=*/8, {32, 32}, q8);
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, GgufWeights::open(dir_.write("k.gguf", b.build())));
  const std::vector<float> k = read_all(*w, "model.layers.0.self_attn.k_proj.weight");
  ASSERT_EQ(k.size(), 32u * 32u);
  const int64_t hf_row_in_head[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // of stored rows 0..7
  for (int s = 0; s < 32; ++s) {
    const int64_t r = (s / 8) * 8 + hf_row_in_head[s % 8];
    EXPECT_EQ(k[r * 32], static_cast<float>(s)) << s;
    EXPECT_EQ(k[r * 32 + 31], static_cast<float>(s + 31)) << s;
  }
}

TEST_F(GgufWeightsTest, NamesRawAndListing) {
  TinyLlama p;
  p.tied = false;
  GgufBuilder b = testing::tiny_llama_gguf(p);
  b.f32_tensor("custom.extra", {2}, {1, 2});
  const std::string path = dir_.write("named.gguf", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, GgufWeights::open(path));
  EXPECT_EQ(w->path(), path);
  EXPECT_EQ(w->config().hidden_size, 8);
  EXPECT_TRUE(w->has("lm_head.weight"));
  EXPECT_TRUE(w->has("model.norm.weight"));
  EXPECT_TRUE(w->has("custom.extra"));  // no HF name: kept as is
  EXPECT_FALSE(w->has("output.weight"));
  const std::vector<TensorInfo> infos = w->tensors();
  ASSERT_EQ(infos.size(), 13u);
  EXPECT_EQ(infos[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(infos[0].shape, (std::vector<int64_t>{4, 8}));

  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor q, w->raw("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(q.qk_permuted);
  EXPECT_EQ(q.qk_head_dim, 4);  // 8 rows, 2 heads
  EXPECT_EQ(q.nbytes, 64u * 4u);
  EXPECT_EQ(q.info.dtype, DType::kF32);
  float first;
  std::memcpy(&first, q.data, 4);
  EXPECT_EQ(first, 2000.0f);
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor v, w->raw("model.layers.0.self_attn.v_proj.weight"));
  EXPECT_FALSE(v.qk_permuted);
  EXPECT_EQ(v.qk_head_dim, 0);
  EXPECT_EQ(gguf_type_name(GgufType::kF32), "f32");
  EXPECT_EQ(w->gguf().find_tensor("output.weight")->name, "output.weight");
}

TEST_F(GgufWeightsTest, ReadErrorsNameFileAndTensor) {
  const std::string path = dir_.write("err.gguf", testing::tiny_llama_gguf(TinyLlama{}).build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, GgufWeights::open(path));
  std::vector<float> out(64);
  const int64_t wrong[] = {8, 4};
  absl::Status st = w->read_f32("model.layers.0.self_attn.q_proj.weight", wrong, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(),
              HasSubstr("'model.layers.0.self_attn.q_proj.weight' (GGUF 'blk.0.attn_q.weight')"));
  EXPECT_THAT(st.message(), HasSubstr("shape [8, 8] does not match the expected shape [8, 4]"));

  const int64_t right[] = {8, 8};
  std::vector<float> small(63);
  st = w->read_f32("model.layers.0.self_attn.q_proj.weight", right, small);
  EXPECT_THAT(st.message(), HasSubstr("output buffer holds 63 floats but the tensor has 64"));

  st = w->read_f32("lm_head.weight", right, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("'lm_head.weight'"));
  EXPECT_EQ(w->raw("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(GgufWeightsTest, NonDequantizableTypeIsReportedOnRead) {
  GgufBuilder b;
  testing::add_llama_metadata(b, TinyLlama{});
  b.tensor("blk.0.attn_v.weight", /*Q8_1=*/9, {32}, std::string(36, '\0'));
  const std::string path = dir_.write("q81.gguf", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, GgufWeights::open(path));
  std::vector<float> out(32);
  const int64_t shape[] = {32};
  absl::Status st = w->read_f32("model.layers.0.self_attn.v_proj.weight", shape, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("dtype Q8_1 cannot be converted"));
}

TEST_F(GgufWeightsTest, QRowsThatDoNotSplitIntoHeadsAreRejected) {
  TinyLlama p;
  p.heads = 4;
  p.kv_heads = 4;
  GgufBuilder b;
  testing::add_llama_metadata(b, p);
  b.f32_tensor("blk.0.attn_q.weight", {8, 6}, std::vector<float>(48));  // 6 rows, 4 heads
  const std::string path = dir_.write("badq.gguf", b.build());
  absl::Status st = GgufWeights::open(path).status();
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(),
              HasSubstr("tensor 'blk.0.attn_q.weight': 6 rows cannot be split into 4"));
}

TEST_F(GgufWeightsTest, NameCollisionIsRejected) {
  GgufBuilder b;
  testing::add_llama_metadata(b, TinyLlama{});
  b.f32_tensor("output_norm.weight", {8}, std::vector<float>(8));
  b.f32_tensor("model.norm.weight", {8}, std::vector<float>(8));
  EXPECT_THAT(GgufWeights::open(dir_.write("dup.gguf", b.build())).status().message(),
              HasSubstr("maps to HF name 'model.norm.weight', which another tensor already has"));
}

TEST_F(GgufWeightsTest, OpenWeightsDispatchesOnContent) {
  const std::string gguf = dir_.write("m.gguf", testing::tiny_llama_gguf(TinyLlama{}).build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, open_weights(gguf));
  EXPECT_EQ(w->config().num_layers, 1);
  EXPECT_NE(dynamic_cast<GgufWeights*>(w.get()), nullptr);

  const std::string text = dir_.write("notes.txt", "hello, not a model");
  absl::Status st = open_weights(text).status();
  EXPECT_EQ(st.message(), "not a GGUF file or HF model directory: " + text);

  st = open_weights(dir_.path("absent.gguf")).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("absent.gguf"));

  // A directory is read as an HF model: without config.json that fails naming the file.
  st = open_weights(dir_.path()).status();
  EXPECT_THAT(st.message(), HasSubstr("config.json"));
}

}  // namespace
}  // namespace tessera
