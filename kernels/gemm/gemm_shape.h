// One GEMM of a linear layer as the GPU backend runs it, row-major:
//   out[m, n] = x[m, k] @ w[n, k]^T      m = tokens, n = out features, k = in features
// and its tuning signature, which reads the same call column-major (BLAS, PyTorch TunableOp):
// transa = T, transb = N, M = n, N = m, K = k (runtime/backend/gemm_signature.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace tessera::gpu {

struct GemmShape {
  int64_t m = 0;  // tokens
  int64_t n = 0;  // out features
  int64_t k = 0;  // in features
  GemmDType dtype = GemmDType::kBF16;  // x and w: the backend's compute dtype, kBF16 or kF16
  GemmDType out = GemmDType::kBF16;    // dtype, or kF32 (the logits)

  size_t out_element_bytes() const { return out == GemmDType::kF32 ? 4 : 2; }
  friend bool operator==(const GemmShape&, const GemmShape&) = default;
};

// GemmTunableOp_BFloat16_TN / GemmTunableOp_Half_TN (+ _F32out for fp32 output), as PyTorch
// names the same call.
GemmSignature signature_of(const GemmShape& shape);
// The shape of a linear-layer signature (bf16 or fp16 inputs, output of the input dtype or fp32,
// TN, packed leading dimensions); InvalidArgument naming the signature for any other, which the
// GPU backend never runs.
absl::StatusOr<GemmShape> shape_of(const GemmSignature& sig);

}  // namespace tessera::gpu
