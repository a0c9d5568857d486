// FP8 (e4m3) quantization on the device, for the scaled GEMMs (kernels/gemm/gpu_gemm.h): 16-bit
// activations or weights to FP8 codes with fp32 scales, x ~= fp8(x / scale) * scale.
//
//   quantize_fp8_per_tensor   one scale for the whole tensor from its largest |x| (dynamic
//                             activation quantization): an amax pass whose last block writes the
//                             scale, then a quantize pass that reads it; any size, m = 1 .. 8192
//                             rows of an 8B model's widths included
//   quantize_fp8_with_scale   the quantize pass alone, with a scale already on the device (a
//                             checkpoint's static input scale, or a per-tensor one computed before)
//   quantize_fp8_per_row      a scale per row (weights w[n, k], one per output feature; or
//                             activations x[m, k], one per token), one block per row
//   dequantize_fp8            codes back to 16-bit values (the tuner's operands, tests)
//
// Math in fp32; codes are base/fp8.h's encoder (round to nearest even, saturating to the largest
// finite value, NaN kept), the same function the host runs, so a host loop over
// float_to_fp8(enc, x / scale) reproduces every code bit for bit (fp32 division; a NaN x is
// encoded as itself, its sign kept, as fp8_quantize_reference does). 16-byte loads where x is
// 16-byte aligned and 8-byte stores where q is 8-byte aligned (element by element otherwise).
// Element types: gpu_bf16 and gpu_f16; encodings kE4M3FN and kE4M3FNUZ (kE5M2 encodes too, but no
// GEMM reads it).
#pragma once

#include <cstdint>

#include "base/fp8.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

// The smallest scale written (FLT_MIN): an all-zero tensor (or row) gets it, and its codes are 0.
inline constexpr float kFp8MinScale = 1.17549435e-38f;

// The scale that maps |x| <= amax onto the encoding's finite range: amax / max finite (448 for
// e4m3fn, 240 for e4m3fnuz), at least kFp8MinScale. A NaN amax gives a NaN scale (and NaN codes):
// a non-finite input shows in the output rather than being hidden.
TESSERA_FP8_HOST_DEVICE inline float fp8_scale_for_amax(float amax, Fp8Encoding enc) {
  const float s = amax / fp8_max_finite(enc);
  return s < kFp8MinScale ? kFp8MinScale : s;
}

// The code of x at `scale`, as the kernels compute it (host side, for checking them).
inline uint8_t fp8_quantize_reference(float x, float scale, Fp8Encoding enc) {
  return float_to_fp8(enc, x != x ? x : x / scale);
}

// An e4m3 code's value (fn or fnuz, by `enc`), built in integers (exact, subnormals included,
// whatever the fp32 denormal mode), NaN codes NaN: the decoder of device code (dequantize_fp8,
// the FP8 KV cache's widening), base/fp8.h's fp8_to_float on the host.
#if defined(__CUDACC__) || defined(__HIPCC__)
__device__ __forceinline__ float fp8_e4m3_value(uint8_t code, Fp8Encoding enc) {
  const uint32_t mag = code & 0x7fu, exp = mag >> 3, mant = mag & 7u;
  const bool fnuz = enc == Fp8Encoding::kE4M3FNUZ;
  if (fnuz ? code == 0x80u : mag == 0x7fu) return __uint_as_float(0x7fc00000u);
  const int bias = fnuz ? 8 : 7;
  // Subnormal: mant * 2^(1 - bias - 3); normal: the exponent rebiased to fp32's 127.
  const float v = exp == 0 ? static_cast<float>(mant) * __uint_as_float((125u - bias) << 23)
                           : __uint_as_float(((exp + 127u - bias) << 23) | (mant << 20));
  return (code & 0x80u) ? -v : v;
}

// The code of x at `scale` on the device, as fp8_quantize_reference computes it on the host: a
// NaN x is encoded from its own bits (its sign kept; x / scale would give the canonical NaN).
// Every kernel that writes scaled FP8 codes (these, and the norms and activations that write their
// output as FP8 for the scaled GEMMs, gpu_ops.h) encodes through it.
__device__ __forceinline__ uint8_t fp8_encode_scaled(float x, float scale, Fp8Encoding enc) {
  return fp8_detail::encode_bits(enc, __float_as_uint(isnan(x) ? x : x / scale));
}

// |v| as bits that order as unsigned integers (a NaN orders above infinity, so it wins): the
// row maxima the per-row scales come from.
__device__ __forceinline__ uint32_t fp8_abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }
#endif

// Device scratch of quantize_fp8_per_tensor (zeroed by the call itself).
inline constexpr size_t kFp8PerTensorScratchBytes = 8;

// x[count] -> q[count]: *scale = fp8_scale_for_amax(max |x[i]|), q[i] = fp8(x[i] / *scale).
// `scale` and `scratch` (kFp8PerTensorScratchBytes) are device memory; the call owns `scratch`
// until it completes on `stream`.
template <typename T>
gpuError_t quantize_fp8_per_tensor(const T* x, int64_t count, Fp8Encoding enc, uint8_t* q,
                                   float* scale, void* scratch, gpuStream_t stream);

// q[i] = fp8(x[i] / *scale), `scale` a device scalar.
template <typename T>
gpuError_t quantize_fp8_with_scale(const T* x, int64_t count, Fp8Encoding enc, const float* scale,
                                   uint8_t* q, gpuStream_t stream);

// w[rows, cols] -> q[rows, cols], row_scales[rows]: row r's scale is fp8_scale_for_amax of its
// largest |w[r, j]|, q[r, j] = fp8(w[r, j] / row_scales[r]).
template <typename T>
gpuError_t quantize_fp8_per_row(const T* w, int64_t rows, int64_t cols, Fp8Encoding enc,
                                uint8_t* q, float* row_scales, gpuStream_t stream);

// x[r, c] = T(value(q[r, c]) * scales[per_row ? r : 0]) for e4m3 codes (kE4M3FN or kE4M3FNUZ),
// rounded to nearest even; NaN codes give NaN.
template <typename T>
gpuError_t dequantize_fp8(const uint8_t* q, int64_t rows, int64_t cols, Fp8Encoding enc,
                          const float* scales, bool per_row, T* x, gpuStream_t stream);

}  // namespace tessera::gpu
