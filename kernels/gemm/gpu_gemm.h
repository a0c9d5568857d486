// The BLAS seam of the GPU backend: row-major out[m, n] = x[m, k] @ w[n, k]^T, bf16 inputs,
// fp32 accumulation, bf16 or fp32 output. cuBLASLt on CUDA, hipBLASLt on ROCm, with the
// library's default heuristic (the GEMM-tuning issue extends this with TunableOp-style search).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

class Gemm {
 public:
  enum class OutType { kBF16, kF32 };

  // Creates the library handle and a workspace on the current device.
  static absl::Status create(std::unique_ptr<Gemm>* out);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  absl::Status linear(const gpu_bf16* x, const gpu_bf16* w, void* out, OutType out_type,
                      int64_t m, int64_t n, int64_t k, gpuStream_t stream);

 private:
  Gemm() = default;
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

}  // namespace tessera::gpu
