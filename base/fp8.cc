#include "base/fp8.h"

namespace tessera {
namespace {

struct Format {
  int mant_bits;
  int bias;
  uint32_t max_code;  // magnitude bits of the largest finite value
  uint8_t nan_code;   // magnitude bits of the NaN written (e4m3fnuz: the whole code)
  bool signed_zero;   // whether -0 exists (e4m3fnuz: 0x80 is NaN instead)
};

constexpr Format format(Fp8Encoding enc) {
  switch (enc) {
    case Fp8Encoding::kE4M3FN:
      return {3, 7, 0x7e, 0x7f, true};
    case Fp8Encoding::kE4M3FNUZ:
      return {3, 8, 0x7f, 0x80, false};
    case Fp8Encoding::kE5M2:
      return {2, 15, 0x7b, 0x7f, true};
  }
  return {3, 7, 0x7e, 0x7f, true};
}

// v >> s rounded to nearest, ties to even; s in [1, 63].
uint32_t shift_rne(uint32_t v, int s) {
  if (s >= 32) return 0;  // v < 2^32: below one half of the result's unit (no tie possible)
  const uint64_t wide = v;
  const uint64_t q = wide >> s;
  const uint64_t rem = wide & ((uint64_t{1} << s) - 1);
  const uint64_t half = uint64_t{1} << (s - 1);
  return static_cast<uint32_t>(q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0));
}

}  // namespace

float fp8_max_finite(Fp8Encoding enc) {
  switch (enc) {
    case Fp8Encoding::kE4M3FN:
      return 448.0f;
    case Fp8Encoding::kE4M3FNUZ:
      return 240.0f;
    case Fp8Encoding::kE5M2:
      return 57344.0f;
  }
  return 0.0f;
}

uint8_t float_to_fp8(Fp8Encoding enc, float f) {
  const Format fmt = format(enc);
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return enc == Fp8Encoding::kE4M3FNUZ ? fmt.nan_code : sign | fmt.nan_code;
  const int exp32 = static_cast<int>(abs >> 23);
  const uint32_t mant32 = abs & 0x7fffffu;
  const int min_normal_exp = 1 - fmt.bias;  // unbiased exponent of the smallest normal
  uint32_t mag = 0;
  if (exp32 == 0) {
    mag = 0;  // fp32 zero or subnormal: far below half the smallest FP8 subnormal
  } else if (exp32 - 127 >= min_normal_exp) {
    // Normal: exponent and top mantissa bits side by side, then the dropped bits rounded; a carry
    // out of the mantissa bumps the exponent, and anything past the largest finite code
    // (infinity included) saturates.
    const int drop = 23 - fmt.mant_bits;
    const uint32_t combined =
        (static_cast<uint32_t>(exp32 - 127 + fmt.bias) << fmt.mant_bits) | (mant32 >> drop);
    const uint32_t rem = mant32 & ((1u << drop) - 1u);
    const uint32_t half = 1u << (drop - 1);
    mag = combined + ((rem > half || (rem == half && (combined & 1u))) ? 1u : 0u);
    if (mag > fmt.max_code) mag = fmt.max_code;
  } else {
    // Subnormal: the significand in units of the smallest subnormal, 2^(1 - bias - mant_bits).
    // Rounding up to 2^mant_bits units gives the smallest normal's code, as it should.
    const uint32_t sig = mant32 | 0x800000u;
    const int shift = 23 + min_normal_exp - fmt.mant_bits - (exp32 - 127);
    mag = shift_rne(sig, shift);
  }
  if (mag == 0 && !fmt.signed_zero) return 0;
  return static_cast<uint8_t>(sign | mag);
}

}  // namespace tessera
