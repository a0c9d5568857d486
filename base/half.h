// IEEE fp16 and bfloat16 <-> fp32 conversions (bit-exact, round-to-nearest-even), header-only so
// that dequantization loops inline them.
#pragma once

#include <bit>
#include <cstdint>

namespace tessera {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN (payload kept)
  }
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;  // NaN -> quiet NaN
  // 65520 (0x477ff000) is halfway between 65504 (largest half, odd mantissa) and 2^16: RNE
  // rounds it and everything above to infinity.
  if (mag >= 0x477ff000u) return sign | 0x7c00u;
  if (mag < 0x38800000u) {
    // Below 2^-14 the result is subnormal: adding 0.5 puts the value's bits at the fp32 ulp of
    // 2^-24, so the FPU's own round-to-nearest-even does the rounding.
    const float shifted = std::bit_cast<float>(mag) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal: rebias 127 -> 15, then round the 13 dropped mantissa bits to nearest even. A carry
  // out of the mantissa correctly bumps the exponent.
  uint32_t r = mag - (112u << 23);
  r += 0x0fffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

inline float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN -> quiet NaN, sign kept
  }
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace tessera
