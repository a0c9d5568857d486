// The CPU reference kernels, fp32 throughout, on raw pointers so that tests call them directly.
// Shapes follow runtime/backend.h.
#pragma once

#include <cstdint>

#include "runtime/backend.h"

namespace tessera::cpu {

// Below this many elements of work a parallel region costs more than it saves (a decode step's
// elementwise ops), and under CPU contention its barrier can stall for a whole time slice.
inline constexpr int64_t kParallelMinWork = 1 << 16;

// out [n, hidden] = table[ids[t]]
void embedding(const float* table, int64_t vocab, int64_t hidden, const int32_t* ids, int64_t n,
               float* out);
// out [n, hidden] = x / rms(x) * w
void rms_norm(const float* x, const float* w, int64_t n, int64_t hidden, float eps, float* out);
// residual [n, hidden] += x; out = rms_norm(residual) * w
void add_rms_norm(float* residual, const float* x, const float* w, int64_t n, int64_t hidden,
                  float eps, float* out);
// out [m, n] = x [m, k] @ w [n, k]^T  (OpenBLAS)
void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* out);
// out [n, inter] = silu(gate_up[:, :inter]) * gate_up[:, inter:]
void silu_mul(const float* gate_up, int64_t n, int64_t inter, float* out);
// Rotate-half RoPE of q and k heads of qkv [n, qkv_width] in place at batch.positions, then the
// k and v heads into caches [num_blocks, block_size, n_kv_heads, head_dim] at batch.slot_mapping.
void rope_and_cache(float* qkv, const float* inv_freq, const StepBatch& batch, AttentionShape s,
                    float* k_cache, float* v_cache);
// Causal paged attention: out [n, n_heads * head_dim].
void attention(const float* qkv, const float* k_cache, const float* v_cache, int32_t block_size,
               const StepBatch& batch, AttentionShape s, float scale, float* out);

}  // namespace tessera::cpu
