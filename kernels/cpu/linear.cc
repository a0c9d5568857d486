// GEMM on the CPU: OpenBLAS with the weight transposed in place (x @ w^T), in the ways
// cpu_gemm_algos.h lists.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "kernels/cpu/cpu_gemm_algos.h"
#include "kernels/cpu/cpu_ops.h"

namespace tessera::cpu {

namespace {

void sgemm(const float* x, const float* w, int64_t m, int64_t n, int64_t k, int64_t ldc,
           float* out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, x, static_cast<int>(k), w, static_cast<int>(k), 0.0f, out,
              static_cast<int>(ldc));
}

void sgemv(const float* x, const float* w, int64_t n, int64_t k, float* out) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
              static_cast<int>(k), x, 1, 0.0f, out, 1);
}

void split_out(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* out) {
  const int64_t blocks = std::clamp<int64_t>(omp_get_max_threads(), 1, n);
  const int64_t per_block = (n + blocks - 1) / blocks;
  // Inside a parallel region the OpenMP build of OpenBLAS runs each call on its own thread.
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * per_block;
    const int64_t count = std::min(per_block, n - begin);
    if (count > 0) sgemm(x, w + begin * k, m, count, k, n, out + begin);
  }
}

}  // namespace

std::string_view gemm_algo_name(GemmAlgo algo) {
  switch (algo) {
    case GemmAlgo::kDefault:
      return "Default";
    case GemmAlgo::kSgemm:
      return "cpu_sgemm";
    case GemmAlgo::kGemvRows:
      return "cpu_gemv_rows";
    case GemmAlgo::kSplitOut:
      return "cpu_split_out";
  }
  return "unknown";
}

std::optional<GemmAlgo> parse_gemm_algo(std::string_view name) {
  for (GemmAlgo a : {GemmAlgo::kDefault, GemmAlgo::kSgemm, GemmAlgo::kGemvRows,
                     GemmAlgo::kSplitOut}) {
    if (gemm_algo_name(a) == name) return a;
  }
  return std::nullopt;
}

void linear_with(GemmAlgo algo, const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                 float* out) {
  switch (algo) {
    case GemmAlgo::kDefault:
      linear(x, w, m, n, k, out);
      return;
    case GemmAlgo::kSgemm:
      sgemm(x, w, m, n, k, n, out);
      return;
    case GemmAlgo::kGemvRows:
      for (int64_t t = 0; t < m; ++t) sgemv(x + t * k, w, n, k, out + t * n);
      return;
    case GemmAlgo::kSplitOut:
      split_out(x, w, m, n, k, out);
      return;
  }
}

void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* out) {
  if (m == 1) {
    // Decode: a GEMV reads the weight once, row by row.
    sgemv(x, w, n, k, out);
    return;
  }
  sgemm(x, w, m, n, k, n, out);
}

}  // namespace tessera::cpu
