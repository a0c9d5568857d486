#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/half.h"
#include "runtime/model_io/safetensors_file.h"
#include "runtime/model_io/safetensors_weights.h"
#include "tests/unit/model/gguf_builder.h"
#include "tests/unit/model/safetensors_builder.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::SafetensorsBuilder;
using testing::TempDir;

using testing::bf16_bytes;
using testing::f16_bytes;

// A llama config.json for a model of hidden 4, 1 layer, vocab 3.
const char* kTinyConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 3,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "max_position_embeddings": 64,
  "tie_word_embeddings": true
})";

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string open_error(std::string_view name, const std::string& bytes) {
    const std::string path = dir_.write(name, bytes);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(path);
    EXPECT_FALSE(f.ok()) << name << " unexpectedly opened";
    if (f.ok()) return "";
    const std::string msg(f.status().message());
    EXPECT_THAT(msg, HasSubstr(path));
    return msg;
  }

  TempDir dir_;
};

TEST_F(SafetensorsTest, SingleFileTensors) {
  SafetensorsBuilder b;
  b.tensor("a", "F32", "[2,3]", testing::f32_bytes({0, 1, 2, 3, 4, 5}))
      .tensor("h", "F16", "[3]", f16_bytes({1.5f, -2.0f, 65504.0f}))
      .tensor("b", "BF16", "[2]", bf16_bytes({3.0f, -0.5f}))
      .tensor("s", "F32", "[]", testing::f32_bytes({7}))
      .tensor("empty", "F32", "[0,4]", "");
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f,
                               SafetensorsFile::open(dir_.write("m.safetensors", b.build())));
  ASSERT_EQ(f->tensors().size(), 5u);  // __metadata__ skipped
  const SafetensorsTensor* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  float v;
  std::memcpy(&v, f->tensor_bytes(*a).data() + 20, 4);
  EXPECT_EQ(v, 5.0f);
  EXPECT_EQ(f->find("h")->dtype, DType::kF16);
  EXPECT_EQ(f->find("b")->dtype, DType::kBF16);
  EXPECT_TRUE(f->find("s")->shape.empty());
  EXPECT_EQ(f->find("s")->nbytes, 4u);
  EXPECT_EQ(f->find("empty")->nbytes, 0u);
  EXPECT_EQ(f->find("__metadata__"), nullptr);
}

TEST_F(SafetensorsTest, BadHeaders) {
  EXPECT_THAT(open_error("tiny.safetensors", "1234"), HasSubstr("too short"));
  std::string huge;
  testing::put_u64(huge, 1ull << 63);
  huge += "{}";
  EXPECT_THAT(open_error("huge.safetensors", huge), HasSubstr("header length 9223372036854775808"));
  std::string longer;
  testing::put_u64(longer, 100);
  longer += "{}";
  EXPECT_THAT(open_error("longer.safetensors", longer), HasSubstr("header length 100 exceeds"));

  SafetensorsBuilder b;
  EXPECT_THAT(open_error("json.safetensors", b.with_header("{\"a\": [1, 2")),
              HasSubstr("header is not valid JSON"));
  EXPECT_THAT(open_error("array.safetensors", b.with_header("[1, 2]")),
              HasSubstr("header must be a JSON object, got array"));
}

// Two tensors whose data_offsets share bytes are refused, naming both; tensors back to back
// (and an empty tensor at another's offset) are fine.
TEST_F(SafetensorsTest, TensorsSharingBytesAreRefusedNamingBoth) {
  SafetensorsBuilder b;
  b.tensor("a", "F32", "[4]", testing::f32_bytes({1, 2, 3, 4}))
      .add_entry("b", "F32", "[2]", 8, 16);
  const std::string msg = open_error("overlap.safetensors", b.build());
  EXPECT_THAT(msg, HasSubstr("tensor 'b': data_offsets [8, 16] overlap tensor 'a' at [0, 16]: "
                             "tensors must not share bytes"));

  SafetensorsBuilder ok;
  ok.tensor("a", "F32", "[2]", testing::f32_bytes({1, 2}))
      .tensor("b", "F32", "[2]", testing::f32_bytes({3, 4}))
      .add_entry("empty", "F32", "[0]", 4, 4);
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, SafetensorsFile::open(dir_.write("ok.safetensors", ok.build())));
  EXPECT_EQ(f->tensors().size(), 3u);
}

TEST_F(SafetensorsTest, BadEntriesNameTheTensor) {
  auto one = [](const std::string& entry, size_t data_bytes = 64) {
    SafetensorsBuilder b;
    b.raw_entry(entry);
    return b.build() + std::string(data_bytes, '\0');
  };
  EXPECT_THAT(open_error("i64.safetensors",
                         one(R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]})")),
              HasSubstr("tensor 'ids': dtype I64 is not supported (F32, F16, BF16, F8_E4M3, F8_E5M2 are)"));
  EXPECT_THAT(
      open_error("f99.safetensors", one(R"("w":{"dtype":"F99","shape":[2],"data_offsets":[0,8]})")),
      HasSubstr("tensor 'w': unknown dtype 'F99'"));
  EXPECT_THAT(open_error("neg.safetensors",
                         one(R"("w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})")),
              HasSubstr("tensor 'w': 'shape' entries must be non-negative integers"));
  EXPECT_THAT(open_error("noshape.safetensors", one(R"("w":{"dtype":"F32","data_offsets":[0,8]})")),
              HasSubstr("tensor 'w': 'shape' must be an array"));
  EXPECT_THAT(open_error("past.safetensors",
                         one(R"("w":{"dtype":"F32","shape":[32],"data_offsets":[0,128]})")),
              HasSubstr("tensor 'w': data_offsets [0, 128] are not inside the data section of 64"));
  EXPECT_THAT(open_error("reversed.safetensors",
                         one(R"("w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]})")),
              HasSubstr("tensor 'w': data_offsets [8, 4]"));
  EXPECT_THAT(
      open_error("size.safetensors",
                 one(R"("w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]})")),
      HasSubstr("tensor 'w': data_offsets [0, 8] hold 8 bytes but shape and dtype F16 need 3 x 2"));
  EXPECT_THAT(
      open_error(
          "overflow.safetensors",
          one(R"("w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]})")),
      HasSubstr("tensor 'w': element count overflows"));
  EXPECT_THAT(open_error("offsets.safetensors",
                         one(R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0]})")),
              HasSubstr("tensor 'w': 'data_offsets' must be [begin, end]"));
  EXPECT_THAT(open_error("notobj.safetensors", one(R"("w":[1,2])")),
              HasSubstr("tensor 'w': entry must be an object"));
  EXPECT_THAT(
      open_error("dup.safetensors", one(R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                        R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})")),
      HasSubstr("tensor 'w' appears twice"));
}

class HfDirTest : public SafetensorsTest {
 protected:
  void write_config(const std::string& sub = "") { dir_.write(sub + "config.json", kTinyConfig); }
};

TEST_F(HfDirTest, SingleModelFile) {
  write_config();
  SafetensorsBuilder b;
  b.tensor("model.embed_tokens.weight", "BF16", "[3,4]",
           bf16_bytes({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
      .tensor("model.norm.weight", "F16", "[4]", f16_bytes({1, 1, 0.5, 2}));
  dir_.write("model.safetensors", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, open_weights(dir_.path()));
  EXPECT_EQ(w->path(), dir_.path());
  EXPECT_EQ(w->config().hidden_size, 4);
  EXPECT_TRUE(w->config().tie_word_embeddings);
  EXPECT_TRUE(w->has("model.norm.weight"));
  EXPECT_FALSE(w->has("lm_head.weight"));
  ASSERT_EQ(w->tensors().size(), 2u);

  std::vector<float> emb(12);
  const int64_t shape[] = {3, 4};
  ASSERT_TRUE(w->read_f32("model.embed_tokens.weight", shape, emb).ok());
  EXPECT_EQ(emb[11], 11.0f);
  std::vector<float> norm(4);
  const int64_t nshape[] = {4};
  ASSERT_TRUE(w->read_f32("model.norm.weight", nshape, norm).ok());
  EXPECT_EQ(norm, (std::vector<float>{1, 1, 0.5, 2}));
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor raw, w->raw("model.norm.weight"));
  EXPECT_EQ(raw.nbytes, 8u);
  EXPECT_FALSE(raw.qk_permuted);

  absl::Status st = w->read_f32("model.embed_tokens.weight", nshape, norm);
  EXPECT_THAT(st.message(), HasSubstr(dir_.path("model.safetensors")));
  EXPECT_THAT(
      st.message(),
      HasSubstr("'model.embed_tokens.weight': shape [3, 4] does not match the expected shape [4]"));
  st = w->read_f32("missing.weight", nshape, norm);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("'missing.weight'"));
}

// A weight that is not finite fails read_f32 naming the file, the tensor, the element and its
// value, whatever its stored dtype; a finite bf16 or f16 value loads (the check is on fp32, which
// holds them all).
TEST_F(HfDirTest, NonFiniteWeightsFailTheReadNamingTensorAndElement) {
  write_config();
  std::vector<float> emb(12, 0.25f);
  emb[7] = std::numeric_limits<float>::quiet_NaN();
  SafetensorsBuilder b;
  b.tensor("model.embed_tokens.weight", "F32", "[3,4]", testing::f32_bytes(emb))
      .tensor("model.norm.weight", "BF16", "[4]",
              bf16_bytes({1, -std::numeric_limits<float>::infinity(), 3e38f, 1}))
      .tensor("lm_head.weight", "F16", "[3,4]", f16_bytes(std::vector<float>(12, 65504.0f)));
  dir_.write("model.safetensors", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, open_weights(dir_.path()));

  std::vector<float> out(12);
  const int64_t shape[] = {3, 4};
  absl::Status st = w->read_f32("model.embed_tokens.weight", shape, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(dir_.path("model.safetensors") +
                                      ": tensor 'model.embed_tokens.weight': element 7 (row 1, "
                                      "column 3) of F32 tensor [3, 4] is NaN"));
  std::vector<float> norm(4);
  const int64_t nshape[] = {4};
  st = w->read_f32("model.norm.weight", nshape, norm);
  EXPECT_THAT(st.message(), HasSubstr("tensor 'model.norm.weight': element 1 of BF16 tensor [4] "
                                      "is -inf"));
  EXPECT_TRUE(w->read_f32("lm_head.weight", shape, out).ok());
  EXPECT_EQ(out[11], 65504.0f);
}

void write_shards(TempDir& dir) {
  SafetensorsBuilder s1, s2;
  s1.tensor("model.embed_tokens.weight", "F32", "[3,4]",
            testing::f32_bytes(std::vector<float>(12, 1)));
  s1.tensor("unlisted", "F32", "[1]", testing::f32_bytes({0}));
  s2.tensor("model.norm.weight", "F32", "[4]", testing::f32_bytes({4, 3, 2, 1}));
  dir.write("model-00001-of-00002.safetensors", s1.build());
  dir.write("model-00002-of-00002.safetensors", s2.build());
}

TEST_F(HfDirTest, ShardedWithIndex) {
  write_config();
  write_shards(dir_);
  dir_.write("model.safetensors.index.json", R"({"metadata": {"total_size": 64}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00002-of-00002.safetensors"}})");
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, open_weights(dir_.path()));
  EXPECT_EQ(w->tensors().size(), 2u);  // the index decides what the model holds
  EXPECT_FALSE(w->has("unlisted"));
  std::vector<float> norm(4);
  const int64_t shape[] = {4};
  ASSERT_TRUE(w->read_f32("model.norm.weight", shape, norm).ok());
  EXPECT_EQ(norm, (std::vector<float>{4, 3, 2, 1}));
}

TEST_F(HfDirTest, IndexErrors) {
  write_config();
  write_shards(dir_);
  const std::string index = dir_.path("model.safetensors.index.json");
  dir_.write("model.safetensors.index.json",
             R"({"weight_map": {"model.norm.weight": "model-00003-of-00003.safetensors"}})");
  absl::Status st = open_weights(dir_.path()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(index));
  EXPECT_THAT(st.message(),
              HasSubstr("shard 'model-00003-of-00003.safetensors' of tensor 'model.norm.weight'"));

  dir_.write("model.safetensors.index.json",
             R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
  st = open_weights(dir_.path()).status();
  EXPECT_THAT(st.message(),
              HasSubstr("tensor 'model.norm.weight' is mapped to shard "
                        "'model-00001-of-00002.safetensors', which does not contain it"));

  dir_.write("model.safetensors.index.json",
             R"({"weight_map": {"model.norm.weight": "../model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(open_weights(dir_.path()).status().message(),
              HasSubstr("must be the file name of a shard"));

  dir_.write("model.safetensors.index.json", R"({"weight_map": [1]})");
  EXPECT_THAT(open_weights(dir_.path()).status().message(), HasSubstr("'weight_map' is missing"));

  dir_.write("model.safetensors.index.json", R"({"weight_map": )");
  st = open_weights(dir_.path()).status();
  EXPECT_THAT(st.message(), HasSubstr(index));
  EXPECT_THAT(st.message(), HasSubstr("invalid JSON"));
}

TEST_F(HfDirTest, SeveralFilesWithoutIndex) {
  write_config();
  write_shards(dir_);
  TESSERA_ASSERT_OK_AND_ASSIGN(auto w, open_weights(dir_.path()));
  EXPECT_EQ(w->tensors().size(), 3u);
  EXPECT_TRUE(w->has("unlisted"));
  EXPECT_TRUE(w->has("model.norm.weight"));

  SafetensorsBuilder dup;
  dup.tensor("model.norm.weight", "F32", "[4]", testing::f32_bytes({0, 0, 0, 0}));
  dir_.write("model-extra.safetensors", dup.build());
  absl::Status st = open_weights(dir_.path()).status();
  EXPECT_THAT(st.message(), HasSubstr("tensor 'model.norm.weight' is in both"));
}

TEST_F(HfDirTest, MissingPieces) {
  absl::Status st = open_weights(dir_.path()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(dir_.path("config.json")));

  write_config();
  st = open_weights(dir_.path()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(),
              HasSubstr("no model.safetensors.index.json, model.safetensors or other"));

  dir_.write("model.safetensors", "garbage");
  st = open_weights(dir_.path()).status();
  EXPECT_THAT(st.message(), HasSubstr(dir_.path("model.safetensors")));
}

}  // namespace
}  // namespace tessera
