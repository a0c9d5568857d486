// Embedding, RMSNorm (plain and fused with the residual add) and SiLU-and-mul on the CPU.
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace tessera::cpu {

void embedding(const float* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t n,
               float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    // Ids are validated against the vocab before they reach a step; clamp defensively anyway.
    int64_t id = ids[t] < 0 || ids[t] >= vocab ? 0 : ids[t];
    std::memcpy(out + t * hidden, table + id * hidden, hidden * sizeof(float));
  }
}

static void normalize_row(const float* x, const float* w, int64_t hidden, float eps, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < hidden; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / hidden) + eps);
  for (int64_t i = 0; i < hidden; ++i) out[i] = x[i] * inv_rms * w[i];
}

void rms_norm(const float* x, const float* w, int64_t n, int64_t hidden, float eps, float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) normalize_row(x + t * hidden, w, hidden, eps, out + t * hidden);
}

void add_rms_norm(float* residual, const float* x, const float* w, int64_t n, int64_t hidden,
                  float eps, float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    float* r = residual + t * hidden;
    const float* xt = x + t * hidden;
    for (int64_t i = 0; i < hidden; ++i) r[i] += xt[i];
    normalize_row(r, w, hidden, eps, out + t * hidden);
  }
}

void silu_mul(const float* gate_up, int64_t n, int64_t inter, float* out) {
#pragma omp parallel for if (n * inter >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    const float* g = gate_up + t * 2 * inter;
    const float* u = g + inter;
    float* o = out + t * inter;
    for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

}  // namespace tessera::cpu
