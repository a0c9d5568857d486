// GEMM on the CPU: OpenBLAS sgemm with the weight transposed in place (x @ w^T).
#include <cblas.h>

#include "kernels/cpu/cpu_ops.h"

namespace tessera::cpu {

void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* out) {
  if (m == 1) {
    // Decode: a GEMV reads the weight once, row by row.
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
                static_cast<int>(k), x, 1, 0.0f, out, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), 0.0f, out,
              static_cast<int>(n));
}

}  // namespace tessera::cpu
