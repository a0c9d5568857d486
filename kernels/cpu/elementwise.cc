// Embedding, RMSNorm (plain and fused with the residual add), gated activations and soft-capping
// on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace tessera::cpu {

void embedding(const float* table, int64_t first_id, int64_t rows, int64_t hidden,
               const int32_t* ids, int64_t n, float scale, float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    const int64_t id = static_cast<int64_t>(ids[t]) - first_id;
    float* o = out + t * hidden;
    if (id < 0 || id >= rows) {  // another rank's token (ids are validated before a step)
      std::fill(o, o + hidden, 0.0f);
      continue;
    }
    const float* row = table + id * hidden;
    if (scale == 1.0f) {
      std::memcpy(o, row, hidden * sizeof(float));
    } else {
      for (int64_t i = 0; i < hidden; ++i) o[i] = row[i] * scale;
    }
  }
}

void normalize_row(const float* x, const float* w, int64_t hidden, NormSpec norm, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < hidden; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / hidden) + norm.eps);
  for (int64_t i = 0; i < hidden; ++i) out[i] = x[i] * inv_rms * (norm.weight_offset + w[i]);
}

void rms_norm(const float* x, const float* w, int64_t n, int64_t hidden, NormSpec norm, float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) normalize_row(x + t * hidden, w, hidden, norm, out + t * hidden);
}

void add_rms_norm(float* residual, const float* x, const float* w, int64_t n, int64_t hidden,
                  NormSpec norm, float* out) {
#pragma omp parallel for if (n * hidden >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    float* r = residual + t * hidden;
    const float* xt = x + t * hidden;
    for (int64_t i = 0; i < hidden; ++i) r[i] += xt[i];
    normalize_row(r, w, hidden, norm, out + t * hidden);
  }
}

namespace {

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace

void gated_activation(const float* gate_up, int64_t n, int64_t inter, Activation act, float* out) {
#pragma omp parallel for if (n * inter >= kParallelMinWork)
  for (int64_t t = 0; t < n; ++t) {
    const float* g = gate_up + t * 2 * inter;
    const float* u = g + inter;
    float* o = out + t * inter;
    if (act == Activation::kSilu) {
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    } else {
      for (int64_t i = 0; i < inter; ++i) o[i] = gelu_tanh(g[i]) * u[i];
    }
  }
}

void soft_cap(float* x, int64_t n, float cap) {
#pragma omp parallel for if (n >= kParallelMinWork)
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace tessera::cpu
