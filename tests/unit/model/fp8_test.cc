// FP8 <-> fp32 (base/fp8.h) for the three encodings, exhaustively against a straightforward
// reference written from the encodings' definitions: every one of the 256 codes decoded, and
// fp32 -> FP8 checked against a brute-force nearest-value search (ties to the even code,
// saturation to the largest finite value, NaN kept) on every code's value, every midpoint between
// neighbours and the floats either side of it, and a sweep over the fp32 bit patterns. Also the
// FP8 dtypes in dequantize_f32 (a stored NaN is non-finite) and their ids outside ggml's.
#include "base/fp8.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "base/dtype.h"
#include "runtime/model_io/dequant.h"

namespace tessera {
namespace {

struct Spec {
  const char* name;
  Fp8Encoding enc;
  int exp_bits;
  int mant_bits;
  int bias;
};

constexpr Spec kSpecs[] = {
    {"e4m3fn", Fp8Encoding::kE4M3FN, 4, 3, 7},
    {"e4m3fnuz", Fp8Encoding::kE4M3FNUZ, 4, 3, 8},
    {"e5m2", Fp8Encoding::kE5M2, 5, 2, 15},
};

// The value of `code` from the definitions: NaN / infinity rules per encoding, else
// (-1)^s * 2^(e - bias) * (1 + m / 2^M), or 2^(1 - bias) * (m / 2^M) for e = 0.
double reference_decode(const Spec& s, uint8_t code) {
  const int sign = code >> 7;
  const int e = (code >> s.mant_bits) & ((1 << s.exp_bits) - 1);
  const int m = code & ((1 << s.mant_bits) - 1);
  const int e_max = (1 << s.exp_bits) - 1;
  const int m_max = (1 << s.mant_bits) - 1;
  switch (s.enc) {
    case Fp8Encoding::kE4M3FN:
      if (e == e_max && m == m_max) return std::nan("");
      break;
    case Fp8Encoding::kE4M3FNUZ:
      if (code == 0x80) return std::nan("");
      break;
    case Fp8Encoding::kE5M2:
      if (e == e_max) return m == 0 ? (sign ? -INFINITY : INFINITY) : std::nan("");
      break;
  }
  const double frac = static_cast<double>(m) / (1 << s.mant_bits);
  const double mag = e == 0 ? std::ldexp(frac, 1 - s.bias) : std::ldexp(1.0 + frac, e - s.bias);
  return sign ? -mag : mag;
}

// The finite non-negative values and their codes, in increasing order (codes 0x00 up to the
// largest finite one, whose values increase with the code).
std::vector<std::pair<double, uint8_t>> finite_magnitudes(const Spec& s) {
  std::vector<std::pair<double, uint8_t>> out;
  for (int c = 0; c < 0x80; ++c) {
    const double v = reference_decode(s, static_cast<uint8_t>(c));
    if (std::isfinite(v)) out.push_back({v, static_cast<uint8_t>(c)});
  }
  return out;
}

// fp32 -> FP8 by brute force: the nearest finite value (ties: the even code), which saturates
// by construction; NaN to the encoding's NaN.
uint8_t reference_encode(const Spec& s, const std::vector<std::pair<double, uint8_t>>& mags, float f) {
  if (std::isnan(f)) return s.enc == Fp8Encoding::kE4M3FNUZ ? 0x80 : (std::signbit(f) ? 0xff : 0x7f);
  const double x = std::fabs(static_cast<double>(f));
  double best_d = INFINITY;
  uint8_t best = 0;
  for (const auto& [v, c] : mags) {
    // Past the largest value it is the nearest (said outright: for huge x the distances to the
    // top few values are equal in double).
    const double d = x >= mags.back().first ? (c == mags.back().second ? 0 : 1) : std::fabs(v - x);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best_d = d;
      best = c;
    }
  }
  if (best == 0 && s.enc == Fp8Encoding::kE4M3FNUZ) return 0;  // no negative zero
  return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

bool same(double want, float got) {
  if (std::isnan(want)) return std::isnan(got);
  return static_cast<double>(got) == want && std::signbit(want) == std::signbit(got);
}

TEST(Fp8Test, DecodesEveryCode) {
  for (const Spec& s : kSpecs) {
    for (int c = 0; c < 256; ++c) {
      const double want = reference_decode(s, static_cast<uint8_t>(c));
      const float got = fp8_to_float(s.enc, static_cast<uint8_t>(c));
      EXPECT_TRUE(same(want, got)) << s.name << " code 0x" << std::hex << c << std::dec << ": "
                                   << got << ", want " << want;
    }
  }
}

TEST(Fp8Test, KnownValues) {
  EXPECT_EQ(fp8_e4m3fn_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3fn_to_float(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3fn_to_float(0xff)));
  EXPECT_EQ(fp8_e4m3fn_to_float(0x78), 256.0f);  // S.1111.000 is a number, not infinity
  EXPECT_EQ(fp8_e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3fn_to_float(0x38), 1.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3fn_to_float(0x80)));
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x7f), 240.0f);
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x40), 1.0f);
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0x01), std::ldexp(1.0f, -10));
  EXPECT_TRUE(std::isnan(fp8_e4m3fnuz_to_float(0x80)));
  EXPECT_EQ(fp8_e4m3fnuz_to_float(0xff), -240.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), INFINITY);
  EXPECT_EQ(fp8_e5m2_to_float(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(0x7d)));
  EXPECT_EQ(fp8_e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  for (const Spec& s : kSpecs) {
    EXPECT_EQ(fp8_max_finite(s.enc), finite_magnitudes(s).back().first) << s.name;
  }

  EXPECT_EQ(float_to_fp8_e4m3fn(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3fn(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3fn(464.0f), 0x7e);  // the tie above 448 would round to NaN's code
  EXPECT_EQ(float_to_fp8_e4m3fn(1e9f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3fn(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3fn(std::ldexp(1.0f, -10)), 0x00);  // tie between 0 and 2^-9: even
  EXPECT_EQ(float_to_fp8_e4m3fn(std::ldexp(3.0f, -11)), 0x01);  // 0.75 * 2^-9: nearest 2^-9
  EXPECT_EQ(float_to_fp8_e4m3fn(std::ldexp(3.0f, -10)), 0x02);  // 1.5 * 2^-9: tie, to even 2
  EXPECT_EQ(float_to_fp8_e4m3fn(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3fn(1.0625f), 0x38);   // halfway 1 and 1.125: to even (1.0)
  EXPECT_EQ(float_to_fp8_e4m3fn(1.1875f), 0x3a);   // halfway 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(float_to_fp8_e4m3fn(std::nanf("")), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(240.0f), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(300.0f), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(-0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(-1e-30f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(std::nanf("")), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3fnuz(1.0f), 0x40);
  EXPECT_EQ(float_to_fp8_e5m2(INFINITY), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7b);  // the tie above the max saturates
  EXPECT_EQ(float_to_fp8_e5m2(1.0f), 0x3c);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(float_to_fp8_e5m2(-std::nanf("")))));
}

// Every code's value, every midpoint between neighbours and the floats just either side, zeros,
// NaN, infinities, fp32 subnormals, and fp32 bit patterns in a sweep and at random.
std::vector<float> encode_inputs(const std::vector<std::pair<double, uint8_t>>& mags) {
  std::vector<float> in = {0.0f, -0.0f, INFINITY, -INFINITY, std::nanf(""),
                           std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::min(), std::numeric_limits<float>::max()};
  for (size_t i = 0; i < mags.size(); ++i) {
    const float v = static_cast<float>(mags[i].first);
    in.push_back(v);
    const float next = i + 1 < mags.size() ? static_cast<float>(mags[i + 1].first)
                                           : v + (v - static_cast<float>(mags[i - 1].first));
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);  // exact in fp32
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), next}) {
      in.push_back(x);
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    in.push_back(f);
  }
  std::mt19937 rng(18);
  std::uniform_real_distribution<float> near(-600.0f, 600.0f);
  for (int i = 0; i < 20000; ++i) in.push_back(near(rng));
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) in.push_back(-in[i]);
  return in;
}

TEST(Fp8Test, EncodesToNearestEvenSaturating) {
  for (const Spec& s : kSpecs) {
    const auto mags = finite_magnitudes(s);
    int failures = 0;
    for (float f : encode_inputs(mags)) {
      const uint8_t want = reference_encode(s, mags, f);
      const uint8_t got = float_to_fp8(s.enc, f);
      if (got != want && ++failures <= 10) {
        ADD_FAILURE() << s.name << " " << f << ": 0x" << std::hex << int{got} << ", want 0x"
                      << int{want};
      }
    }
    EXPECT_EQ(failures, 0) << s.name;
  }
}

TEST(Fp8Test, RoundTripsEveryFiniteCode) {
  for (const Spec& s : kSpecs) {
    for (int c = 0; c < 256; ++c) {
      const float v = fp8_to_float(s.enc, static_cast<uint8_t>(c));
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(float_to_fp8(s.enc, v), c) << s.name << " code " << c;
    }
  }
}

TEST(Fp8Test, DTypesAreOutsideGgmlIdsAndDequantize) {
  EXPECT_FALSE(is_ggml_type(static_cast<uint32_t>(DType::kF8_E4M3)));
  EXPECT_FALSE(is_ggml_type(static_cast<uint32_t>(DType::kF8_E5M2)));
  EXPECT_TRUE(is_ggml_type(static_cast<uint32_t>(DType::kBF16)));
  EXPECT_EQ(dtype_name(DType::kF8_E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_name(DType::kF8_E5M2), "F8_E5M2");
  const DTypeTraits* t = dtype_traits(static_cast<uint32_t>(DType::kF8_E4M3));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->block_elems, 1u);
  EXPECT_EQ(t->block_bytes, 1u);
  EXPECT_TRUE(t->dequantizable);

  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (DType d : {DType::kF8_E4M3, DType::kF8_E5M2}) {
    std::vector<float> out(256);
    ASSERT_TRUE(dequantize_f32(d, codes, out).ok());
    for (int c = 0; c < 256; ++c) {
      const float want = d == DType::kF8_E4M3 ? fp8_e4m3fn_to_float(static_cast<uint8_t>(c))
                                              : fp8_e5m2_to_float(static_cast<uint8_t>(c));
      EXPECT_TRUE(same(want, out[c])) << dtype_name(d) << " " << c;
    }
  }
  // The non-finite check sees a stored NaN (e4m3fn has no infinity) and e5m2's infinity.
  std::vector<float> out(3);
  const std::vector<uint8_t> e4 = {0x38, 0x7e, 0xff};
  absl::StatusOr<int64_t> bad = dequantize_f32_checked(DType::kF8_E4M3, e4, out);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, 2);
  const std::vector<uint8_t> e5 = {0x3c, 0x7c, 0x3c};
  bad = dequantize_f32_checked(DType::kF8_E5M2, e5, out);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(*bad, 1);
}

}  // namespace
}  // namespace tessera
