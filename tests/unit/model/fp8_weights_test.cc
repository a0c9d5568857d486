// FP8 checkpoints' weights with their scales: a safetensors directory written here (F8_E4M3 /
// F8_E5M2 weights, per-tensor, per-channel and 2-D block scales in F32 or BF16, static input
// scales, an fp32 tensor left unquantized) read through open_weights -> read_f32 equals each
// stored code's value times its scale, computed here; a WeightSlice of rows and columns (blocks
// cut anywhere) reads as the same rectangle of the whole tensor; raw() carries the scales; and
// every broken scale (missing, wrong dtype or shape, not finite and positive), a missing static
// input scale, FP8 without quantization_config and a scaled higher-precision weight are refused
// naming the tensors and what was wrong.
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/fp8.h"
#include "base/half.h"
#include "runtime/model_io/weight_slice.h"
#include "runtime/model_io/weight_source.h"
#include "tests/unit/model/gguf_builder.h"
#include "tests/unit/model/safetensors_builder.h"
#include "tests/unit/model/read_weights.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

using Builder = testing::SafetensorsBuilder;

std::string f32(const std::vector<float>& v) { return testing::f32_bytes(v); }
std::string bf16(const std::vector<float>& v) { return testing::bf16_bytes(v); }
std::string bytes(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// rows x cols distinct finite codes (no NaN: e4m3fn's S.1111.111; e5m2's S.11111.xx).
std::vector<uint8_t> codes(int64_t rows, int64_t cols, int salt, bool e5m2 = false) {
  std::vector<uint8_t> c(static_cast<size_t>(rows * cols));
  for (size_t k = 0; k < c.size(); ++k) {
    uint8_t v = static_cast<uint8_t>((k * 37 + static_cast<size_t>(salt) * 11 + 5) % 256);
    if (e5m2 ? (v & 0x7c) == 0x7c : (v & 0x7f) == 0x7f) v = 0x3a;
    c[k] = v;
  }
  return c;
}

std::string config(const std::string& quant) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1,
    "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 3,
    "tie_word_embeddings": true)" +
         (quant.empty() ? std::string() : ", \"quantization_config\": " + quant) + "}";
}

constexpr const char* kFp8Static = R"({"quant_method": "fp8", "activation_scheme": "static"})";
constexpr const char* kCompressedChannel = R"({"quant_method": "compressed-tensors",
  "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {"group_0": {
  "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
  "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}})";
constexpr const char* kFp8Blocks = R"({"quant_method": "fp8", "weight_block_size": [2, 4]})";

using testing::read_all;

// What the rectangle [r0, r0 + nr) x [c0, c0 + nc) of `full` (rows of `cols`) holds.
std::vector<float> rect(const std::vector<float>& full, int64_t cols, IndexRange r, IndexRange c) {
  std::vector<float> out;
  for (int64_t i = r.begin; i < r.end(); ++i) {
    for (int64_t j = c.begin; j < c.end(); ++j) out.push_back(full[static_cast<size_t>(i * cols + j)]);
  }
  return out;
}

class Fp8WeightsTest : public ::testing::Test {
 protected:
  std::unique_ptr<WeightSource> open(const std::string& quant, const Builder& b) {
    dir_.write("config.json", config(quant));
    dir_.write("model.safetensors", b.build());
    absl::StatusOr<std::unique_ptr<WeightSource>> w = open_weights(dir_.path());
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  }
  std::string open_error(const std::string& quant, const Builder& b) {
    dir_.write("config.json", config(quant));
    dir_.write("model.safetensors", b.build());
    absl::StatusOr<std::unique_ptr<WeightSource>> w = open_weights(dir_.path());
    EXPECT_FALSE(w.ok()) << "opened";
    if (w.ok()) return "";
    EXPECT_THAT(w.status().message(), HasSubstr(dir_.path()));
    return std::string(w.status().message());
  }

  TempDir dir_;
};

// AutoFP8-style: per-tensor scale [] and [1], per-channel [out, 1] in BF16, static input scales,
// an fp32 lm_head; plus an F8_E5M2 weight.
TEST_F(Fp8WeightsTest, PerTensorAndPerChannelScalesReadAsCodeTimesScale) {
  const std::vector<uint8_t> a = codes(3, 5, 1), b = codes(4, 6, 2), e = codes(2, 3, 3, true);
  const std::vector<float> b_scales = {0.5f, 0.0078125f, 3.0f, 1.1f};
  Builder st;
  st.tensor("a.weight", "F8_E4M3", "[3,5]", bytes(a))
      .tensor("a.weight_scale", "F32", "[]", f32({0.0123f}))
      .tensor("a.input_scale", "F32", "[1]", f32({0.25f}))
      .tensor("b.weight", "F8_E4M3", "[4,6]", bytes(b))
      .tensor("b.weight_scale", "BF16", "[4,1]", bf16(b_scales))
      .tensor("b.input_scale", "F32", "[]", f32({2.0f}))
      .tensor("e.weight", "F8_E5M2", "[2,3]", bytes(e))
      .tensor("e.weight_scale", "F32", "[1]", f32({0.001f}))
      .tensor("e.input_scale", "F32", "[1]", f32({1.0f}))
      .tensor("lm_head.weight", "F32", "[2]", f32({1.5f, -2.5f}));
  std::unique_ptr<WeightSource> w = open(kFp8Static, st);
  ASSERT_NE(w, nullptr);

  std::vector<float> want;
  for (uint8_t c : a) want.push_back(fp8_e4m3fn_to_float(c) * 0.0123f);
  EXPECT_EQ(read_all(*w, "a.weight"), want);
  want.clear();
  for (size_t k = 0; k < b.size(); ++k) {
    want.push_back(fp8_e4m3fn_to_float(b[k]) * bf16_to_float(float_to_bf16(b_scales[k / 6])));
  }
  const std::vector<float> b_full = read_all(*w, "b.weight");
  EXPECT_EQ(b_full, want);
  want.clear();
  for (uint8_t c : e) want.push_back(fp8_e5m2_to_float(c) * 0.001f);
  EXPECT_EQ(read_all(*w, "e.weight"), want);
  EXPECT_EQ(read_all(*w, "lm_head.weight"), (std::vector<float>{1.5f, -2.5f}));

  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor ra, w->raw("a.weight"));
  EXPECT_EQ(ra.info.dtype, DType::kF8_E4M3);
  EXPECT_EQ(ra.scales.kind, WeightScales::Kind::kTensor);
  EXPECT_EQ(ra.scales.name, "a.weight_scale");
  EXPECT_EQ(ra.scales.input_scale, 0.25f);
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor rb, w->raw("b.weight"));
  EXPECT_EQ(rb.scales.kind, WeightScales::Kind::kRow);
  EXPECT_EQ(rb.scales.input_scale, 2.0f);
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor rl, w->raw("lm_head.weight"));
  EXPECT_FALSE(rl.scales.scaled());

  // A tensor-parallel rank's rows (the row scales follow), and columns.
  for (auto [r, c] : {std::pair<IndexRange, IndexRange>{{1, 2}, {0, 6}},
                      {{0, 4}, {2, 3}},
                      {{3, 1}, {5, 1}},
                      {{1, 3}, {1, 4}}}) {
    TESSERA_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WeightSlice> slice,
                                 WeightSlice::create(*w, "b.weight", r, c));
    EXPECT_EQ(read_all(*slice, "b.weight"), rect(b_full, 6, r, c))
        << "rows " << r.begin << "+" << r.count << " cols " << c.begin << "+" << c.count;
  }
}

// compressed-tensors "FP8-dynamic": per-channel F32 scales [out, 1], no input scales.
TEST_F(Fp8WeightsTest, CompressedTensorsPerChannel) {
  const std::vector<uint8_t> q = codes(3, 4, 7);
  const std::vector<float> s = {0.25f, 0.01f, 7.0f};
  Builder st;
  st.tensor("model.layers.0.self_attn.q_proj.weight", "F8_E4M3", "[3,4]", bytes(q))
      .tensor("model.layers.0.self_attn.q_proj.weight_scale", "F32", "[3,1]", f32(s))
      .tensor("lm_head.weight", "BF16", "[1]", bf16({1.0f}));
  std::unique_ptr<WeightSource> w = open(kCompressedChannel, st);
  ASSERT_NE(w, nullptr);
  std::vector<float> want;
  for (size_t k = 0; k < q.size(); ++k) want.push_back(fp8_e4m3fn_to_float(q[k]) * s[k / 4]);
  EXPECT_EQ(read_all(*w, "model.layers.0.self_attn.q_proj.weight"), want);
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor r, w->raw("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(r.scales.input_scale, 0.0f);  // dynamic activations: none stored
  EXPECT_EQ(w->config().quantization.method, WeightQuantization::Method::kCompressedTensors);
}

// Block-wise (weight_block_size [2, 4], weight_scale_inv [ceil(5/2), ceil(9/4)] = [3, 3]): the
// last blocks are partial; slices cut blocks anywhere.
TEST_F(Fp8WeightsTest, BlockScalesAndSlicesCuttingBlocks) {
  const int64_t rows = 5, cols = 9;
  const std::vector<uint8_t> q = codes(rows, cols, 9);
  std::vector<float> grid(9);
  for (size_t k = 0; k < grid.size(); ++k) grid[k] = 0.125f * static_cast<float>(k + 1);
  Builder st;
  st.tensor("m.weight", "F8_E4M3", "[5,9]", bytes(q)).tensor("m.weight_scale_inv", "F32", "[3,3]", f32(grid));
  std::unique_ptr<WeightSource> w = open(kFp8Blocks, st);
  ASSERT_NE(w, nullptr);
  std::vector<float> want;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      want.push_back(fp8_e4m3fn_to_float(q[static_cast<size_t>(r * cols + c)]) *
                     grid[static_cast<size_t>(r / 2 * 3 + c / 4)]);
    }
  }
  const std::vector<float> full = read_all(*w, "m.weight");
  EXPECT_EQ(full, want);
  TESSERA_ASSERT_OK_AND_ASSIGN(RawTensor raw, w->raw("m.weight"));
  EXPECT_EQ(raw.scales.kind, WeightScales::Kind::kBlock);
  EXPECT_EQ(raw.scales.grid_cols, 3);
  for (auto [r, c] : {std::pair<IndexRange, IndexRange>{{0, 2}, {0, 9}},
                      {{1, 3}, {0, 9}},
                      {{0, 5}, {3, 6}},
                      {{3, 2}, {5, 4}},
                      {{4, 1}, {8, 1}}}) {
    TESSERA_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WeightSlice> slice,
                                 WeightSlice::create(*w, "m.weight", r, c));
    EXPECT_EQ(read_all(*slice, "m.weight"), rect(full, cols, r, c))
        << "rows " << r.begin << "+" << r.count << " cols " << c.begin << "+" << c.count;
  }
}

// A stored NaN (S.1111.111) fails the load naming the element and the scales, as read_f32 and a
// slice convert it.
TEST_F(Fp8WeightsTest, NonFiniteElementIsNamedWithItsScales) {
  std::vector<uint8_t> q = codes(2, 4, 4);
  q[6] = 0xff;
  Builder st;
  st.tensor("x.weight", "F8_E4M3", "[2,4]", bytes(q)).tensor("x.weight_scale", "F32", "[2,1]", f32({1.0f, 2.0f}));
  std::unique_ptr<WeightSource> w = open(R"({"quant_method": "fp8"})", st);
  ASSERT_NE(w, nullptr);
  std::vector<float> out(8);
  const std::vector<int64_t> shape = {2, 4};
  absl::Status s = w->read_f32("x.weight", shape, out);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'x.weight': element 6 (row 1, column 2) of F8_E4M3 "
                                     "tensor [2, 4] with per-row scales 'x.weight_scale' is NaN"));
  TESSERA_ASSERT_OK_AND_ASSIGN(std::unique_ptr<WeightSlice> slice,
                               WeightSlice::create(*w, "x.weight", {1, 1}, {1, 3}));
  std::vector<float> part(3);
  const std::vector<int64_t> part_shape = {1, 3};
  s = slice->read_f32("x.weight", part_shape, part);
  EXPECT_THAT(s.message(), HasSubstr("element 1 (row 0, column 1)"));
  EXPECT_THAT(s.message(), HasSubstr("is NaN"));
}

TEST_F(Fp8WeightsTest, BrokenScalesAreRefusedNamingBothTensors) {
  const std::string w8 = bytes(codes(4, 6, 5));
  auto with_scale = [&](const std::string& dtype, const std::string& shape, const std::string& b) {
    Builder st;
    st.tensor("p.weight", "F8_E4M3", "[4,6]", w8).tensor("p.weight_scale", dtype, shape, b);
    return st;
  };
  const std::string dynamic = R"({"quant_method": "fp8"})";
  Builder missing;
  missing.tensor("p.weight", "F8_E4M3", "[4,6]", w8);
  EXPECT_THAT(open_error(dynamic, missing),
              HasSubstr("tensor 'p.weight' (F8_E4M3 [4, 6]): its scale tensor 'p.weight_scale' is "
                        "not in the model"));
  EXPECT_THAT(open_error(dynamic, with_scale("F8_E4M3", "[1]", "\x38")),
              HasSubstr("its scale tensor 'p.weight_scale' is F8_E4M3 (F32, BF16 or F16 expected)"));
  EXPECT_THAT(open_error(dynamic, with_scale("F32", "[2,1]", f32({1, 1}))),
              HasSubstr("its scale tensor 'p.weight_scale' has shape [2, 1]; quantization_config "
                        "(fp8) expects [] or [1] (per tensor) or [4, 1] (per output row)"));
  EXPECT_THAT(open_error(kCompressedChannel, with_scale("F32", "[1]", f32({1}))),
              HasSubstr("has shape [1]; quantization_config (compressed-tensors) expects [4, 1] "
                        "(per output row)"));
  EXPECT_THAT(open_error(dynamic, with_scale("F32", "[4,1]", f32({1, NAN, 1, 1}))),
              HasSubstr("its scale tensor 'p.weight_scale' [4, 1] holds nan at element 1 (scales "
                        "must be finite and positive)"));
  EXPECT_THAT(open_error(dynamic, with_scale("F32", "[]", f32({0}))),
              HasSubstr("holds 0 at element 0"));
  EXPECT_THAT(open_error(dynamic, with_scale("F32", "[]", f32({-1}))),
              HasSubstr("holds -1 at element 0"));
  EXPECT_THAT(open_error(dynamic, with_scale("F32", "[]", f32({INFINITY}))),
              HasSubstr("holds inf at element 0"));
  {
    Builder st;
    st.tensor("p.weight", "F8_E4M3", "[4,6]", w8).tensor("p.weight_scale_inv", "F32", "[2,1]", f32({1, 1}));
    EXPECT_THAT(open_error(kFp8Blocks, st),
                HasSubstr("its scale tensor 'p.weight_scale_inv' has shape [2, 1]; "
                          "quantization_config (fp8) expects [2, 2] (one per 2x4 block)"));
  }
  {
    // A stored dimension near INT64_MAX (the tensor holds no element) does not overflow the
    // block grid it is checked against.
    Builder st;
    st.tensor("p.weight", "F8_E4M3", "[0,9223372036854775807]", "")
        .tensor("p.weight_scale_inv", "F32", "[1,1]", f32({1}));
    EXPECT_THAT(open_error(kFp8Blocks, st),
                HasSubstr("expects [0, 2305843009213693952] (one per 2x4 block)"));
  }
  {
    // The shape is checked before the values: a misshapen scale tensor is refused for its shape.
    Builder st;
    st.tensor("p.weight", "F8_E4M3", "[4,6]", w8).tensor("p.weight_scale", "F32", "[3]", f32({NAN, 1, 1}));
    EXPECT_THAT(open_error(dynamic, st), HasSubstr("its scale tensor 'p.weight_scale' has shape [3]"));
  }
  // Static activations need each linear's input_scale, one finite positive value.
  EXPECT_THAT(open_error(kFp8Static, with_scale("F32", "[]", f32({1}))),
              HasSubstr("tensor 'p.weight' (F8_E4M3 [4, 6]): its input scale 'p.input_scale' is not "
                        "in the model (quantization_config says the activations are static)"));
  {
    Builder st = with_scale("F32", "[]", f32({1}));
    st.tensor("p.input_scale", "F32", "[2]", f32({1, 1}));
    EXPECT_THAT(open_error(kFp8Static, st),
                HasSubstr("its input scale 'p.input_scale' has shape [2]; one value"));
  }
  {
    Builder st = with_scale("F32", "[]", f32({1}));
    st.tensor("p.input_scale", "F32", "[]", f32({NAN}));
    EXPECT_THAT(open_error(dynamic, st), HasSubstr("'p.input_scale' [] holds nan"));
  }
  // FP8 with no quantization_config, FP8 that is not a weight, a scaled BF16 weight.
  EXPECT_THAT(open_error("", with_scale("F32", "[]", f32({1}))),
              HasSubstr("tensor 'p.weight' (F8_E4M3 [4, 6]): FP8 weights need config.json's "
                        "quantization_config"));
  {
    Builder st;
    st.tensor("p.bias", "F8_E4M3", "[4]", bytes(codes(1, 4, 1)));
    EXPECT_THAT(open_error(dynamic, st), HasSubstr("tensor 'p.bias' (F8_E4M3 [4]): only a linear's"));
  }
  {
    Builder st;
    st.tensor("p.weight", "BF16", "[2]", bf16({1, 2})).tensor("p.weight_scale", "F32", "[]", f32({1}));
    EXPECT_THAT(open_error(dynamic, st),
                HasSubstr("tensor 'p.weight' is stored as BF16 but has a scale tensor "
                          "'p.weight_scale': only weights stored as FP8"));
  }
}

}  // namespace
}  // namespace tessera
