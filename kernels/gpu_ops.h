// Launchers of the GPU kernels, on raw device pointers; each returns the launch's error
// (gpuGetLastError) so that the caller can turn it into a Status. Shapes follow runtime/backend.h.
// One translation unit per family: elementwise.cu, attention.cu.
#pragma once

#include <cstdint>

#include "kernels/gpu.h"

namespace tessera::gpu {

// The step's metadata on the device (see runtime/step_batch.h); seq_of maps token -> sequence.
struct DeviceStep {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* context_len = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* logits_rows = nullptr;
  const int32_t* seq_of = nullptr;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_blocks = 0;
  int32_t num_logits = 0;
};

gpuError_t f32_to_bf16(const float* src, gpu_bf16* dst, int64_t n, gpuStream_t stream);
gpuError_t embedding(const gpu_bf16* table, int64_t vocab, int64_t hidden, const int32_t* ids,
                     int64_t n, gpu_bf16* out, gpuStream_t stream);
// residual may be null (plain rms_norm); otherwise residual += x first.
gpuError_t rms_norm(gpu_bf16* residual, const gpu_bf16* x, const gpu_bf16* w, int64_t n,
                    int64_t hidden, float eps, gpu_bf16* out, gpuStream_t stream);
gpuError_t silu_mul(const gpu_bf16* gate_up, int64_t n, int64_t inter, gpu_bf16* out,
                    gpuStream_t stream);
gpuError_t gather_rows(const gpu_bf16* x, int64_t hidden, const int32_t* rows, int64_t n_rows,
                       gpu_bf16* out, gpuStream_t stream);

gpuError_t rope_and_cache(gpu_bf16* qkv, const float* inv_freq, const DeviceStep& step,
                          int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                          gpu_bf16* k_cache, gpu_bf16* v_cache, gpuStream_t stream);
// Largest head_dim the attention kernel takes.
inline constexpr int kMaxHeadDim = 256;
gpuError_t attention(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                     int32_t block_size, const DeviceStep& step, int32_t num_heads,
                     int32_t num_kv_heads, int32_t head_dim, float scale, gpu_bf16* out,
                     gpuStream_t stream);

}  // namespace tessera::gpu
