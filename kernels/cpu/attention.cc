// RoPE + KV-cache write, and causal paged attention, on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace tessera::cpu {

namespace {

// RoPE of one head vector [head_dim] at `position`: pair i is (i, i + half) or (2i, 2i + 1).
void rotate(float* x, const float* inv_freq, int32_t head_dim, int32_t position, RopeStyle style) {
  const int32_t half = head_dim / 2;
  const bool interleaved = style == RopeStyle::kInterleaved;
  for (int32_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    float& a = x[interleaved ? 2 * i : i];
    float& b = x[interleaved ? 2 * i + 1 : i + half];
    const float x0 = a, x1 = b;
    a = x0 * c - x1 * s;
    b = x0 * s + x1 * c;
  }
}

}  // namespace

void rope_and_cache(float* qkv, const float* inv_freq, const StepBatch& batch, AttentionShape s,
                    const QkvPrologueData& prologue, float* k_cache, float* v_cache) {
  const int32_t n = batch.num_tokens();
  const int32_t d = s.head_dim;
  const int64_t width = s.qkv_width();
  const int64_t kv_row = static_cast<int64_t>(s.num_kv_heads) * d;
#pragma omp parallel for if (n * width >= kParallelMinWork)
  for (int32_t t = 0; t < n; ++t) {
    float* row = qkv + t * width;
    if (prologue.bias != nullptr) {
      for (int64_t i = 0; i < width; ++i) row[i] += prologue.bias[i];
    }
    for (int32_t h = 0; h < s.num_heads + s.num_kv_heads; ++h) {
      const float* norm = h < s.num_heads ? prologue.q_norm : prologue.k_norm;
      if (norm != nullptr) normalize_row(row + h * d, norm, d, prologue.norm, row + h * d);
    }
    const int32_t pos = batch.positions[t];
    for (int32_t h = 0; h < s.num_heads + s.num_kv_heads; ++h) {
      rotate(row + h * d, inv_freq, d, pos, s.rope_style);
    }
    const int64_t slot = batch.slot_mapping[t];
    if (slot < 0) continue;  // padding: no cache entry
    const float* k = row + static_cast<int64_t>(s.num_heads) * d;
    std::memcpy(k_cache + slot * kv_row, k, kv_row * sizeof(float));
    std::memcpy(v_cache + slot * kv_row, k + kv_row, kv_row * sizeof(float));
  }
}

void attention(const float* qkv, const float* k_cache, const float* v_cache, int32_t block_size,
               const StepBatch& batch, AttentionShape s, const AttentionSpec& spec, float* out) {
  const int32_t d = s.head_dim;
  const int64_t width = s.qkv_width();
  const int64_t kv_row = static_cast<int64_t>(s.num_kv_heads) * d;
  const int32_t group = s.num_heads / s.num_kv_heads;
  const int32_t n = batch.num_tokens();

  // Token t belongs to the sequence whose query range holds it.
  std::vector<int32_t> seq_of(n);
  int64_t work = 0;  // query-key dot products this call
  for (int32_t q = 0; q < batch.num_seqs(); ++q) {
    for (int32_t t = batch.query_start[q]; t < batch.query_start[q + 1]; ++t) {
      seq_of[t] = q;
      work += static_cast<int64_t>(batch.positions[t] + 1) * s.num_heads * d;
    }
  }

#pragma omp parallel if (work >= kParallelMinWork)
  {
    std::vector<float> scores;  // [context] for one (token, head)
    std::vector<float> acc(d);
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (int32_t t = 0; t < n; ++t) {
      for (int32_t h = 0; h < s.num_heads; ++h) {
        const int32_t seq = seq_of[t];
        const int32_t* table = batch.block_tables.data() + static_cast<int64_t>(seq) * batch.max_blocks;
        // Causal: a query at position p sees keys 0..p of its own sequence, the last `window`
        // of them on a sliding-window layer.
        const int32_t n_keys = batch.positions[t] + 1;
        const int32_t first_key = spec.window > 0 ? std::max(0, n_keys - spec.window) : 0;
        const float* q = qkv + t * width + static_cast<int64_t>(h) * d;
        const int32_t kv_head = h / group;
        scores.resize(n_keys);
        float max_score = -INFINITY;
        for (int32_t j = first_key; j < n_keys; ++j) {
          const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
          const float* k = k_cache + slot * kv_row + static_cast<int64_t>(kv_head) * d;
          float dot = 0.0f;
          for (int32_t i = 0; i < d; ++i) dot += q[i] * k[i];
          scores[j] = dot * spec.scale;
          if (spec.softcap > 0.0f) scores[j] = spec.softcap * std::tanh(scores[j] / spec.softcap);
          max_score = std::max(max_score, scores[j]);
        }
        float denom = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int32_t j = first_key; j < n_keys; ++j) {
          const float p = std::exp(scores[j] - max_score);
          denom += p;
          const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
          const float* v = v_cache + slot * kv_row + static_cast<int64_t>(kv_head) * d;
          for (int32_t i = 0; i < d; ++i) acc[i] += p * v[i];
        }
        float* o = out + static_cast<int64_t>(t) * s.num_heads * d + static_cast<int64_t>(h) * d;
        for (int32_t i = 0; i < d; ++i) o[i] = acc[i] / denom;
      }
    }
  }
}

}  // namespace tessera::cpu
