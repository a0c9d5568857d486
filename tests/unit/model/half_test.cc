#include "base/half.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "tests/unit/model/dequant_reference.h"

namespace tessera {
namespace {

uint16_t load_u16(const std::vector<uint8_t>& bytes, size_t i) {
  uint16_t v;
  std::memcpy(&v, bytes.data() + 2 * i, 2);
  return v;
}

const dequant_reference::Case& reference(std::string_view name) {
  for (const auto& c : dequant_reference::cases()) {
    if (name == c.name) return c;
  }
  ADD_FAILURE() << "no reference case " << name;
  return dequant_reference::cases().front();
}

TEST(HalfTest, EveryFiniteHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(float_to_half(f), h) << std::hex << h << " -> " << f;
  }
}

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(half_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
}

TEST(HalfTest, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.1f, -11)), 0x3c01);      // above the tie
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie between 65504 and 2^16 -> infinity
  EXPECT_EQ(float_to_half(-1e30f), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even zero
  EXPECT_EQ(float_to_half(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie 1 / 2 -> 2
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  // Rounding up out of the subnormal range gives the smallest normal.
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
  const uint16_t nan = float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

// numpy's float32 -> float16 cast (round to nearest even) on the reference value list.
TEST(HalfTest, FloatToHalfMatchesNumpy) {
  const auto& f32 = reference("F32");
  const auto& f16 = reference("F16");
  ASSERT_EQ(f32.values.size(), f16.values.size());
  for (size_t i = 0; i < f32.values.size(); ++i) {
    if (i == 10) continue;  // 1e30 in the F32 list; the F16 list holds 60000 there
    EXPECT_EQ(float_to_half(f32.values[i]), load_u16(f16.bytes, i)) << f32.values[i];
  }
}

TEST(Bf16Test, ConversionsAndRounding) {
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc020), -2.5f);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);        // tie -> even (down)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);    // tie -> even (up)
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  const uint16_t nan = float_to_bf16(-std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
  // A signalling NaN whose payload is only in the low 16 bits must stay a NaN.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7f800001u)))));
}

// gguf-py's BF16 quantizer (ggml_compute_fp32_to_bf16) on the reference value list.
TEST(Bf16Test, FloatToBf16MatchesGgufPy) {
  const auto& f32 = reference("F32");
  const auto& bf16 = reference("BF16");
  for (size_t i = 0; i < f32.values.size(); ++i) {
    EXPECT_EQ(float_to_bf16(f32.values[i]), load_u16(bf16.bytes, i)) << f32.values[i];
  }
}

}  // namespace
}  // namespace tessera
