// One GEMM of a linear layer as the GPU backend runs it, row-major:
//   out[m, n] = x[m, k] @ w[n, k]^T      m = tokens, n = out features, k = in features
// and its tuning signature, which reads the same call column-major (BLAS, PyTorch TunableOp):
// transa = T, transb = N, M = n, N = m, K = k (runtime/backend/gemm_signature.h).
//
// A scaled FP8 GEMM is the same call on FP8 x and w with a per-tensor fp32 scale each:
//   out[m, n] = (x[m, k] * x_scale) @ (w[n, k] * w_scale)^T      out bf16 or fp16
// or, row-wise, a scale per token (x_scale[m]) and per output feature (w_scale[n]):
//   out[m, n] = x_scale[m] * w_scale[n] * (x[m, k] @ w[n, k]^T)
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "base/fp8.h"
#include "runtime/backend.h"

namespace tessera::gpu {

struct GemmShape {
  int64_t m = 0;  // tokens
  int64_t n = 0;  // out features
  int64_t k = 0;  // in features
  // x and w: the backend's compute dtype, kBF16 or kF16; or an FP8 type (a scaled GEMM).
  GemmDType dtype = GemmDType::kBF16;
  GemmDType out = GemmDType::kBF16;  // dtype, or kF32 (the logits); kBF16 or kF16 for FP8 inputs
  bool rowwise = false;              // FP8 only: scales per token and per output feature

  size_t in_element_bytes() const { return is_fp8(dtype) ? 1 : 2; }
  size_t out_element_bytes() const { return out == GemmDType::kF32 ? 4 : 2; }
  friend bool operator==(const GemmShape&, const GemmShape&) = default;
};

// GemmTunableOp_BFloat16_TN / GemmTunableOp_Half_TN (+ _F32out for fp32 output), as PyTorch
// names the same call; ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN and the like
// for FP8 inputs.
GemmSignature signature_of(const GemmShape& shape);
// The shape of a linear-layer signature (bf16 or fp16 inputs, output of the input dtype or fp32;
// or FP8 inputs, bf16 or fp16 output; TN, packed leading dimensions); InvalidArgument naming the signature for any other, which the
// GPU backend never runs.
absl::StatusOr<GemmShape> shape_of(const GemmSignature& sig);

// The base/fp8.h encoding of an FP8 GEMM dtype (kE4M3FN for any other).
inline Fp8Encoding fp8_encoding_of(GemmDType t) {
  return t == GemmDType::kF8E4M3FNUZ ? Fp8Encoding::kE4M3FNUZ : Fp8Encoding::kE4M3FN;
}

}  // namespace tessera::gpu
