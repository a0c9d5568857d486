// Weights checked at load: dequantize_f32_checked finds the first NaN or infinite element as it
// converts (plain runs longer than one check run, quantized blocks whose scale is NaN, a block
// whose arithmetic overflows fp32), and GgufWeights::read_f32 fails naming the tensor (HF and
// GGUF names), the element (row and column; a permuted q/k row with its HF row too) and its value.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/half.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_file.h"
#include "runtime/model_io/weight_source.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<uint8_t> bytes_of(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> halves_of(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(DequantCheckedTest, FindsTheFirstNonFiniteElementOfPlainTypes) {
  // Longer than one check run (4096), the first bad element in the third run.
  std::vector<float> f(10000, 1.5f);
  std::vector<float> out(f.size());
  absl::StatusOr<int64_t> bad = dequantize_f32_checked(DType::kF32, bytes_of(f), out);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(*bad, -1);
  EXPECT_EQ(out, f);
  f[9000] = kNaN;
  f[9500] = kInf;
  bad = dequantize_f32_checked(DType::kF32, bytes_of(f), out);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, 9000);
  f[4096] = -kInf;  // the first element of the second run
  EXPECT_EQ(*dequantize_f32_checked(DType::kF32, bytes_of(f), out), 4096);

  std::vector<float> small(4);
  EXPECT_EQ(*dequantize_f32_checked(
                DType::kF16, halves_of({float_to_half(1), 0x7c00, 0x7e00, 0}), small),
            1);  // +inf before NaN
  EXPECT_EQ(*dequantize_f32_checked(DType::kBF16, halves_of({0, 0, 0, 0x7fc0}), small), 3);
  // The largest finite halves are finite.
  EXPECT_EQ(*dequantize_f32_checked(DType::kF16, halves_of({0x7bff, 0xfbff, 0, 0}), small), -1);
  // Unconvertible input is still an error, not an index.
  EXPECT_FALSE(dequantize_f32_checked(DType::kF32, bytes_of({1, 2}), small).ok());
}

TEST(DequantCheckedTest, FindsNonFiniteBlocksAndOverflowingBlockArithmetic) {
  // Q8_0: [d f16][32 x int8]; the second block's scale is NaN -> its element 0 (index 32).
  std::vector<uint8_t> q8(2 * 34, 1);
  const uint16_t one = float_to_half(0.5f), nan = 0x7e00;
  std::memcpy(q8.data(), &one, 2);
  std::memcpy(q8.data() + 34, &nan, 2);
  std::vector<float> out(64);
  EXPECT_EQ(*dequantize_f32_checked(DType::kQ8_0, q8, out), 32);
  std::memcpy(q8.data() + 34, &one, 2);
  EXPECT_EQ(*dequantize_f32_checked(DType::kQ8_0, q8, out), -1);
  EXPECT_EQ(out[63], 0.5f);

  // Q8_K: [d f32][256 x int8][16 x int16]; every stored field finite, but d * 127 overflows fp32
  // at element 5 (the others are 0 * d = 0).
  std::vector<uint8_t> q8k(292, 0);
  const float big = std::numeric_limits<float>::max();
  std::memcpy(q8k.data(), &big, 4);
  q8k[4 + 5] = 127;
  std::vector<float> out_k(256);
  EXPECT_EQ(*dequantize_f32_checked(DType::kQ8_K, q8k, out_k), 5);
  // The unchecked conversion still writes every element as it is.
  ASSERT_TRUE(dequantize_f32(DType::kQ8_K, q8k, out_k).ok());
  EXPECT_EQ(out_k[5], kInf);
  EXPECT_EQ(out_k[6], 0.0f);
}

// The tiny llama of gguf_builder.h (hidden 8, ffn 16, 2 heads of 4, 1 kv head), with `value`
// planted at `element` of GGUF tensor `name`.
std::string planted_gguf(const std::string& name, int64_t element, float value) {
  testing::TinyLlama p;
  const std::string file = testing::tiny_llama_gguf(p).build();
  TempDir dir;
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(dir.write("clean.gguf", file));
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return file;
  const GgufTensorInfo* t = (*f)->find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return file;
  std::string planted = file;
  std::memcpy(planted.data() + (*f)->data_offset() + t->offset + element * 4, &value, 4);
  return planted;
}

TEST(NonFiniteWeightTest, GgufReadFailsNamingTheTensorAndTheElement) {
  TempDir dir;
  // ffn_down: HF [hidden 8, ffn 16]; element 37 is row 2, column 5.
  const std::string down = dir.write("down.gguf", planted_gguf("blk.0.ffn_down.weight", 37, kNaN));
  absl::StatusOr<std::unique_ptr<WeightSource>> w = open_weights(down);
  ASSERT_TRUE(w.ok()) << w.status();  // opening reads no weight
  std::vector<float> out(8 * 16);
  const int64_t shape[] = {8, 16};
  absl::Status st = (*w)->read_f32("model.layers.0.mlp.down_proj.weight", shape, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(),
              HasSubstr(down + ": tensor 'model.layers.0.mlp.down_proj.weight' (GGUF "
                               "'blk.0.ffn_down.weight'): element 37 (row 2, column 5) of F32 "
                               "tensor [8, 16] is NaN"));
  // The other tensors still read.
  std::vector<float> norm(8);
  const int64_t nshape[] = {8};
  EXPECT_TRUE((*w)->read_f32("model.norm.weight", nshape, norm).ok());

  // attn_q is stored with its rows permuted (2 heads of 4): stored row 1 is HF row 2.
  const std::string q = dir.write("q.gguf", planted_gguf("blk.0.attn_q.weight", 11, -kInf));
  w = open_weights(q);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<float> qout(8 * 8);
  const int64_t qshape[] = {8, 8};
  st = (*w)->read_f32("model.layers.0.self_attn.q_proj.weight", qshape, qout);
  EXPECT_THAT(st.message(),
              HasSubstr("element 11 (row 1, column 3 as stored; HF row 2) of F32 tensor [8, 8] "
                        "is -inf"));
}

}  // namespace
}  // namespace tessera
