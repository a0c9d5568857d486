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
//
// The encoder is header-only and callable from GPU kernels as well (TESSERA_FP8_HOST_DEVICE), so
// that the quantization kernels (kernels/fp8_quantize.h) round exactly as the host does: one
// implementation, from the fp32 bits.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define TESSERA_FP8_HOST_DEVICE __host__ __device__
#else
#define TESSERA_FP8_HOST_DEVICE
#endif

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

// An encoding's layout for the encoder.
struct Format {
  int mant_bits;
  int bias;
  uint32_t max_code;  // magnitude bits of the largest finite value
  uint8_t nan_code;   // magnitude bits of the NaN written (e4m3fnuz: the whole code)
  bool signed_zero;   // whether -0 exists (e4m3fnuz: 0x80 is NaN instead)
};

TESSERA_FP8_HOST_DEVICE constexpr Format format(Fp8Encoding enc) {
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
TESSERA_FP8_HOST_DEVICE constexpr uint32_t shift_rne(uint32_t v, int s) {
  if (s >= 32) return 0;  // v < 2^32: below one half of the result's unit (no tie possible)
  const uint64_t wide = v;
  const uint64_t q = wide >> s;
  const uint64_t rem = wide & ((uint64_t{1} << s) - 1);
  const uint64_t half = uint64_t{1} << (s - 1);
  return static_cast<uint32_t>(q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0));
}

// float_to_fp8 (below) of the fp32 value with bits `x`.
TESSERA_FP8_HOST_DEVICE constexpr uint8_t encode_bits(Fp8Encoding enc, uint32_t x) {
  const Format fmt = format(enc);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    return enc == Fp8Encoding::kE4M3FNUZ ? fmt.nan_code : static_cast<uint8_t>(sign | fmt.nan_code);
  }
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
TESSERA_FP8_HOST_DEVICE constexpr float fp8_max_finite(Fp8Encoding enc) {
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

// fp32 -> FP8: round to nearest, ties to the even code; magnitudes past the largest finite value
// (infinities included) saturate to it with their sign; NaN gives a NaN code (e4m3fn: S.1111.111,
// e4m3fnuz: 0x80, e5m2: S.11111.11). A result of zero keeps the sign where the encoding has -0
// (e4m3fnuz has none: -0 and negative values that round to zero give 0x00).
inline uint8_t float_to_fp8(Fp8Encoding enc, float f) {
  return fp8_detail::encode_bits(enc, std::bit_cast<uint32_t>(f));
}
inline uint8_t float_to_fp8_e4m3fn(float f) { return float_to_fp8(Fp8Encoding::kE4M3FN, f); }
inline uint8_t float_to_fp8_e4m3fnuz(float f) { return float_to_fp8(Fp8Encoding::kE4M3FNUZ, f); }
inline uint8_t float_to_fp8_e5m2(float f) { return float_to_fp8(Fp8Encoding::kE5M2, f); }

}  // namespace tessera
