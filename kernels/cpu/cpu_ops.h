// The CPU reference kernels, fp32 throughout, on raw pointers so that tests call them directly.
// Shapes follow runtime/backend.h.
#pragma once

#include <cstdint>

#include "runtime/backend.h"

namespace tessera::cpu {

// Below this many elements of work a parallel region costs more than it saves (a decode step's
// elementwise ops), and under CPU contention its barrier can stall for a whole time slice.
inline constexpr int64_t kParallelMinWork = 1 << 16;

// out [n, hidden] = table[ids[t] - first_id] * scale; zeros where the id is not one of the
// table's `rows` (a tensor-parallel rank's slice of the vocabulary)
void embedding(const float* table, int64_t first_id, int64_t rows, int64_t hidden,
               const int32_t* ids, int64_t n, float scale, float* out);
// One row: out [hidden] = x / rms(x) * (norm.weight_offset + w) (x may be out)
void normalize_row(const float* x, const float* w, int64_t hidden, NormSpec norm, float* out);
// out [n, hidden] = x / rms(x) * (norm.weight_offset + w)
void rms_norm(const float* x, const float* w, int64_t n, int64_t hidden, NormSpec norm, float* out);
// residual [n, hidden] += x; out = rms_norm(residual) * (norm.weight_offset + w)
void add_rms_norm(float* residual, const float* x, const float* w, int64_t n, int64_t hidden,
                  NormSpec norm, float* out);
// out [m, n] = x [m, k] @ w [n, k]^T  (OpenBLAS)
void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* out);
// out [n, inter] = act(gate_up[:, :inter]) * gate_up[:, inter:]
void gated_activation(const float* gate_up, int64_t n, int64_t inter, Activation act, float* out);
// x [n] = cap * tanh(x / cap) in place
void soft_cap(float* x, int64_t n, float cap);
// The prologue of rope_and_cache as raw pointers (null: not applied).
struct QkvPrologueData {
  const float* bias = nullptr;    // [qkv_width]
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;  // [head_dim]
  NormSpec norm;
};
// The prologue (bias, q/k head norms) on qkv [n, qkv_width] in place, RoPE of the q and k heads
// at batch.positions, then the k and v heads into caches [num_blocks, block_size, n_kv_heads,
// head_dim] at batch.slot_mapping.
void rope_and_cache(float* qkv, const float* inv_freq, const StepBatch& batch, AttentionShape s,
                    const QkvPrologueData& prologue, float* k_cache, float* v_cache);
// Causal paged attention as `spec` says (scale, soft-cap, sliding window): out [n, n_heads *
// head_dim].
void attention(const float* qkv, const float* k_cache, const float* v_cache, int32_t block_size,
               const StepBatch& batch, AttentionShape s, const AttentionSpec& spec, float* out);

}  // namespace tessera::cpu
