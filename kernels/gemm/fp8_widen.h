// FP8 e4m3 codes -> bf16 / fp16 bit patterns by bit placement: the weight conversion of the
// small-M FP8 kernels (smallm_gemm.cu), host and device, so that a host test can prove it exact
// for every code (tests/kernels/gpu_smallm_fp8_test.cc).
//
// An e4m3 code is sign, 4 exponent bits, 3 mantissa bits. Copying the 7 exponent/mantissa bits
// into the low 4 exponent bits and top 3 mantissa bits of a 16-bit float with E exponent bits
// (bf16: E = 8, fp16: E = 5), and the sign into its sign bit, gives the code's value times
// 2^-(bias16 - bias8) exactly -- e4m3 subnormals (exponent 0) included, which land on the 16-bit
// type's subnormals -- because both formats then read the same significand with exponents that
// differ by the constant bias difference: 127 - 7 = 120 for bf16, 15 - 7 = 8 for fp16 (e4m3fnuz,
// bias 8: 119 and 7). Multiplying by that power of two (fp8_widen_unit_bits) in the 16-bit type
// is exact: every e4m3 value is a normal bf16 / fp16 number.
//
// NaN codes are not special-cased: e4m3fn's S.1111.111 widens to +-480 and e4m3fnuz's 0x80 to -0,
// so a kernel built on this computes with finite values where the weights hold NaN codes: weights
// are to be checked for them before (no kernel checks).
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/fp8.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

// Two 32-bit words of 16-bit pairs (low half first, as in memory and in MMA fragments).
struct Fp8WidePairs {
  uint32_t even;  // codes 0 and 2 of the word
  uint32_t odd;   // codes 1 and 3
};

// The four e4m3 codes of a 32-bit word (code j in bits 8j..8j+7, as loaded from memory) as 16-bit
// floats with kExpBits exponent bits (8: bf16, 5: fp16), each the code's value times
// 2^-fp8_widen_exponent(kExpBits, encoding). The pairs come out as (0, 2) and (1, 3), not
// (0, 1) and (2, 3): a dot product pairs them with x permuted alike, and the conversion is then
// one shift per word (each code sits in the high byte of a 16-bit half, where its sign bit
// already is the half's sign bit) and two mask-shift-or steps.
template <int kExpBits>
TESSERA_FP8_HOST_DEVICE constexpr Fp8WidePairs fp8_widen_e4m3x4(uint32_t q) {
  static_assert(kExpBits == 8 || kExpBits == 5, "bf16 or fp16");
  constexpr int kShift = kExpBits - 4;  // exponent/mantissa bits 14..8 -> 10..4 (bf16), 13..7
  constexpr uint32_t kSign = 0x80008000u, kMagnitude = 0x7f007f00u;
  const uint32_t even = q << 8;  // codes 0 and 2 in the high bytes (1 in a low one, 3 gone)
  return {(even & kSign) | ((even & kMagnitude) >> kShift),
          (q & kSign) | ((q & kMagnitude) >> kShift)};
}

// The exponent bits of the 16-bit element type T (gpu_bf16: 8, gpu_f16: 5): the kExpBits that
// fp8_widen_e4m3x4 and the functions below take for widening to T.
template <typename T>
inline constexpr int kFp8WideExpBits = std::is_same_v<T, gpu_f16> ? 5 : 8;

// log2 of the factor fp8_widen_e4m3x4's values are short of the codes' values: the 16-bit
// type's exponent bias less the encoding's (120, 119 for bf16; 8, 7 for fp16).
TESSERA_FP8_HOST_DEVICE constexpr int fp8_widen_exponent(int exp_bits, Fp8Encoding enc) {
  return ((1 << (exp_bits - 1)) - 1) - fp8_detail::format(enc).bias;
}

// That factor as a pair of 16-bit floats (both halves), for a packed multiply.
TESSERA_FP8_HOST_DEVICE constexpr uint32_t fp8_widen_unit_bits(int exp_bits, Fp8Encoding enc) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint32_t half = static_cast<uint32_t>(bias + fp8_widen_exponent(exp_bits, enc))
                        << (15 - exp_bits);
  return half | (half << 16);
}

#if defined(TESSERA_CUDA)
// A pair fp8_widen_e4m3x4 gave, times `unit` (fp8_widen_unit_bits: the power of two it is short
// of, both halves) in the 16-bit type: the codes' values, exactly (every e4m3 value is a normal
// bf16 / fp16 number). A packed fma with -0: fma.rn.bf16x2 exists from sm_80 on, mul.rn.bf16x2
// only from sm_90. Device code of the CUDA kernels (kernels/gpu.h defines TESSERA_CUDA).
template <int kExpBits>
__device__ __forceinline__ uint32_t fp8_widened_times_unit(uint32_t pair, uint32_t unit) {
  static_assert(kExpBits == 8 || kExpBits == 5, "bf16 or fp16");
  constexpr uint32_t kNegativeZeros = 0x80008000u;
  if constexpr (kExpBits == 5) {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(pair) : "r"(pair), "r"(unit), "r"(kNegativeZeros));
  } else {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(pair) : "r"(pair), "r"(unit), "r"(kNegativeZeros));
  }
  return pair;
}
#endif

}  // namespace tessera::gpu
