// 8-bit floating point <-> fp32 conversions for the three FP8 encodings checkpoints and
// accelerators use. Decoding is exact (every FP8 value is an fp32 value) and header-only so that
// dequantization loops inline it; encoding rounds to nearest even and saturates.
//
//   encoding   exponent/mantissa  bias  max finite  infinities  NaN                 zeros
//   e4m3fn     4 / 3              7     448         none        S.1111.111 (2)      +0, -0
//   e4m3fnuz   4 / 3              8     240         none        0x80 only           +0 only
//   e5m2       5 / 2              15    57344       S.11111.00  S.11111.{01,10,11}  +0, -0
//
// e4m3fn is the OCP "E4M3" of safetensors' F8_E4M3 (NVIDIA Hopper/Blackwell, AMD MI350);
// e4m3fnuz is AMD MI300's (CDNA3) variant; e5m2 is safetensors' F8_E5M2 (IEEE-like, with
// infinities).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace tessera {

enum class Fp8Encoding { kE4M3FN, kE4M3FNUZ, kE5M2 };

namespace fp8_detail {

// Magnitude bits -> fp32 for a finite, non-NaN code of an encoding with `kMant` mantissa bits
// and exponent bias `kBias`.
template <int kMant, int kBias>
inline float finite_magnitude(uint32_t mag) {
  const uint32_t exp = mag >> kMant;
  const uint32_t mant = mag & ((1u << kMant) - 1u);
  if (exp == 0) {
    // Subnormal (or zero): mant * 2^(1 - bias - kMant), exact in fp32.
    constexpr float kUnit =
        std::bit_cast<float>(static_cast<uint32_t>(127 + 1 - kBias - kMant) << 23);
    return static_cast<float>(mant) * kUnit;
  }
  // Rebias the exponent to fp32's 127 and move the mantissa to the top of fp32's 23 bits.
  return std::bit_cast<float>(((exp + 127u - kBias) << 23) | (mant << (23 - kMant)));
}

inline float with_sign(float mag, uint8_t code) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | (static_cast<uint32_t>(code & 0x80u) << 24));
}

}  // namespace fp8_detail

inline float fp8_e4m3fn_to_float(uint8_t code) {
  const uint32_t mag = code & 0x7fu;
  if (mag == 0x7fu) return fp8_detail::with_sign(std::numeric_limits<float>::quiet_NaN(), code);
  return fp8_detail::with_sign(fp8_detail::finite_magnitude<3, 7>(mag), code);
}

inline float fp8_e4m3fnuz_to_float(uint8_t code) {
  if (code == 0x80u) return std::numeric_limits<float>::quiet_NaN();
  return fp8_detail::with_sign(fp8_detail::finite_magnitude<3, 8>(code & 0x7fu), code);
}

inline float fp8_e5m2_to_float(uint8_t code) {
  const uint32_t mag = code & 0x7fu;
  if (mag >= 0x7cu) {
    const float special = mag == 0x7cu ? std::numeric_limits<float>::infinity()
                                       : std::numeric_limits<float>::quiet_NaN();
    return fp8_detail::with_sign(special, code);
  }
  return fp8_detail::with_sign(fp8_detail::finite_magnitude<2, 15>(mag), code);
}

inline float fp8_to_float(Fp8Encoding enc, uint8_t code) {
  switch (enc) {
    case Fp8Encoding::kE4M3FN:
      return fp8_e4m3fn_to_float(code);
    case Fp8Encoding::kE4M3FNUZ:
      return fp8_e4m3fnuz_to_float(code);
    case Fp8Encoding::kE5M2:
      return fp8_e5m2_to_float(code);
  }
  return std::numeric_limits<float>::quiet_NaN();
}

// The largest finite value of an encoding: 448, 240, 57344.
float fp8_max_finite(Fp8Encoding enc);

// fp32 -> FP8: round to nearest, ties to the even code; magnitudes past the largest finite value
// (infinities included) saturate to it with their sign; NaN gives a NaN code (e4m3fn: S.1111.111,
// e4m3fnuz: 0x80, e5m2: S.11111.11). A result of zero keeps the sign where the encoding has -0
// (e4m3fnuz has none: -0 and negative values that round to zero give 0x00).
uint8_t float_to_fp8(Fp8Encoding enc, float f);
inline uint8_t float_to_fp8_e4m3fn(float f) { return float_to_fp8(Fp8Encoding::kE4M3FN, f); }
inline uint8_t float_to_fp8_e4m3fnuz(float f) { return float_to_fp8(Fp8Encoding::kE4M3FNUZ, f); }
inline uint8_t float_to_fp8_e5m2(float f) { return float_to_fp8(Fp8Encoding::kE5M2, f); }

}  // namespace tessera
