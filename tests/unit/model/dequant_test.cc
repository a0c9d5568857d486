#include "runtime/model_io/dequant.h"

#include <bit>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/model/dequant_reference.h"

namespace tessera {
namespace {

// Every reference block converts to exactly the floats gguf-py produced (bit for bit: the
// arithmetic is ordered as in ggml, and a difference would mean a layout error anyway).
TEST(DequantTest, MatchesGgufPyReferenceBitForBit) {
  for (const auto& c : dequant_reference::cases()) {
    SCOPED_TRACE(c.name);
    std::vector<float> out(c.values.size(), -12345.0f);
    ASSERT_TRUE(dequantize_f32(c.type, c.bytes, out).ok());
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(c.values[i]))
          << "element " << i << ": got " << out[i] << ", want " << c.values[i];
    }
  }
}

// Each implemented block type is covered by a reference case (so marking a type dequantizable
// without a tested converter fails here).
TEST(DequantTest, ReferenceCoversEveryDequantizableBlockType) {
  std::set<std::string> covered;
  for (const auto& c : dequant_reference::cases()) covered.insert(c.name);
  for (uint32_t id = 0; id < 64; ++id) {
    const DTypeTraits* t = dtype_traits(id);
    if (t == nullptr || !t->dequantizable || t->block_elems == 1) continue;
    EXPECT_TRUE(covered.count(std::string(t->name))) << t->name;
  }
}

// Converting block by block gives the same as converting the whole buffer.
TEST(DequantTest, BlocksConvertIndependently) {
  for (const auto& c : dequant_reference::cases()) {
    SCOPED_TRACE(c.name);
    const DTypeTraits* t = dtype_traits(static_cast<uint32_t>(c.type));
    ASSERT_NE(t, nullptr);
    const size_t n_blocks = c.values.size() / t->block_elems;
    for (size_t b = 0; b < n_blocks; ++b) {
      std::vector<float> out(t->block_elems);
      ASSERT_TRUE(dequantize_f32(
                      c.type,
                      std::span<const uint8_t>(c.bytes).subspan(b * t->block_bytes, t->block_bytes),
                      out)
                      .ok());
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i], c.values[b * t->block_elems + i]);
      }
    }
  }
}

TEST(DequantTest, PlainNumericTypes) {
  std::vector<uint8_t> bytes(8 * 2);
  const double d[2] = {1.5, -1e10};
  std::memcpy(bytes.data(), d, sizeof(d));
  std::vector<float> out(2);
  ASSERT_TRUE(dequantize_f32(DType::kF64, bytes, out).ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -1e10f);

  const int8_t i8[3] = {-128, 0, 127};
  out.resize(3);
  ASSERT_TRUE(
      dequantize_f32(DType::kI8, std::span(reinterpret_cast<const uint8_t*>(i8), 3), out).ok());
  EXPECT_EQ(out, (std::vector<float>{-128, 0, 127}));

  const int16_t i16[2] = {-300, 32767};
  out.resize(2);
  ASSERT_TRUE(
      dequantize_f32(DType::kI16, std::span(reinterpret_cast<const uint8_t*>(i16), 4), out).ok());
  EXPECT_EQ(out, (std::vector<float>{-300, 32767}));

  const int32_t i32[2] = {-70000, 1 << 20};
  ASSERT_TRUE(
      dequantize_f32(DType::kI32, std::span(reinterpret_cast<const uint8_t*>(i32), 8), out).ok());
  EXPECT_EQ(out, (std::vector<float>{-70000, 1 << 20}));

  const int64_t i64[2] = {-5, int64_t{1} << 40};
  ASSERT_TRUE(
      dequantize_f32(DType::kI64, std::span(reinterpret_cast<const uint8_t*>(i64), 16), out).ok());
  EXPECT_EQ(out, (std::vector<float>{-5, 1099511627776.0f}));
}

// Unaligned source (safetensors data can start at any byte).
TEST(DequantTest, UnalignedSource) {
  std::vector<uint8_t> bytes(1 + 4 * 3);
  const float v[3] = {1.25f, -2.0f, 3.5f};
  std::memcpy(bytes.data() + 1, v, sizeof(v));
  std::vector<float> out(3);
  ASSERT_TRUE(dequantize_f32(DType::kF32, std::span<const uint8_t>(bytes).subspan(1), out).ok());
  EXPECT_EQ(out, (std::vector<float>{1.25f, -2.0f, 3.5f}));
}

TEST(DequantTest, NotDequantizableTypeIsNamed) {
  std::vector<uint8_t> bytes(36);
  std::vector<float> out(32);
  absl::Status st = dequantize_f32(DType::kQ8_1, bytes, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("Q8_1"), std::string::npos) << st;
  st = dequantize_f32(static_cast<DType>(16), bytes, out);  // IQ2_XXS: not in the enum
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("16"), std::string::npos) << st;
}

TEST(DequantTest, SizeMismatchesAreErrors) {
  std::vector<uint8_t> bytes(18 * 2);
  std::vector<float> out(64);
  EXPECT_TRUE(dequantize_f32(DType::kQ4_0, bytes, out).ok());
  // Too few bytes for 64 elements.
  EXPECT_FALSE(dequantize_f32(DType::kQ4_0, std::span<const uint8_t>(bytes).first(35), out).ok());
  // Too many.
  bytes.push_back(0);
  EXPECT_FALSE(dequantize_f32(DType::kQ4_0, bytes, out).ok());
  // Element count not a multiple of the block.
  std::vector<float> odd(40);
  absl::Status st = dequantize_f32(DType::kQ4_0, bytes, odd);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Q4_0"), std::string::npos) << st;
}

TEST(DequantTest, DtypeNbytes) {
  EXPECT_EQ(*dtype_nbytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(*dtype_nbytes(DType::kQ6_K, 512), 420u);
  EXPECT_EQ(*dtype_nbytes(DType::kBF16, 3), 6u);
  EXPECT_EQ(*dtype_nbytes(DType::kF32, 0), 0u);
  EXPECT_FALSE(dtype_nbytes(DType::kQ4_K, 255).ok());
  EXPECT_FALSE(dtype_nbytes(DType::kF32, -1).ok());
  EXPECT_FALSE(dtype_nbytes(DType::kF64, int64_t{1} << 62).ok());  // 2^65 bytes
  EXPECT_FALSE(dtype_nbytes(static_cast<DType>(99), 32).ok());
}

// Block sizes as in gguf-py's GGML_QUANT_SIZES (Q8_1 excepted: gguf-py lists a stale 40-byte
// layout; ggml's block_q8_1 is two halves and 32 int8, 36 bytes).
TEST(DTypeTest, TraitsMatchGgml) {
  struct Want {
    uint32_t id;
    const char* name;
    size_t elems, bytes;
  };
  const Want want[] = {{0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},
                       {3, "Q4_1", 32, 20},    {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},
                       {8, "Q8_0", 32, 34},    {9, "Q8_1", 32, 36},    {10, "Q2_K", 256, 84},
                       {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
                       {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},
                       {25, "I16", 1, 2},      {26, "I32", 1, 4},      {27, "I64", 1, 8},
                       {28, "F64", 1, 8},      {30, "BF16", 1, 2}};
  for (const Want& w : want) {
    const DTypeTraits* t = dtype_traits(w.id);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->block_elems, w.elems) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
    EXPECT_EQ(dtype_name(static_cast<DType>(w.id)), w.name);
  }
  for (uint32_t id : {4u, 5u, 16u, 23u, 29u, 31u, 999u, 1002u})
    EXPECT_EQ(dtype_traits(id), nullptr) << id;
  EXPECT_FALSE(dtype_traits(9)->dequantizable);
}

}  // namespace
}  // namespace tessera
