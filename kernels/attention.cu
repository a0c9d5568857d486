// RoPE + paged KV-cache write (after the q/k/v prologue: bias, q/k head norms), and paged causal
// attention for mixed prefill + decode batches (soft-capping and sliding windows in the generic
// kernel).
//
// The generic attention kernel: one CTA per (token, query head), each warp walking a strided
// subset of that token's keys with an online softmax, the warps merged at the end. It serves the
// head dims and GQA groups the fast kernels (attention_prefill.cu, attention_decode.cu) do not,
// and prefill on HIP until the MFMA prefill exists; tests hold the fast kernels against it.
#define TESSERA_GPU_KERNELS_ONLY
#include <cfloat>

#include "kernels/gpu_ops.h"
#include "kernels/launch.h"

namespace tessera::gpu {

namespace {

constexpr int kAttnWarps = 4;
constexpr int kPerLane = (kMaxHeadDim + kWarpSize - 1) / kWarpSize;

constexpr int kRopeThreads = 256;

// grid (n_tokens), block kRopeThreads: a token's heads in passes of kRopeThreads / hw heads, hw =
// head_dim / 2 rounded up to whole warps, each thread on one dimension pair of one head (pair i
// = thread % hw, when i < head_dim / 2). The pair's angle is computed once per thread and serves
// every head it visits (sincosf once per pair and pass slot, not per head). Applies the prologue
// (bias, q/k head norm: the head's sum of squares over its warps), rotates q and k heads in place,
// then writes k and v heads to the cache slot of the token (slots < 0 are padding: skipped).
// Dimension pair i of a head is (i, i + half), or (2i, 2i + 1) when `interleaved`.
template <typename T>
__global__ void __launch_bounds__(kRopeThreads)
    rope_and_cache_kernel(T* qkv, const float* inv_freq, DeviceStep step, int32_t num_heads,
                          int32_t num_kv_heads, int32_t head_dim, bool interleaved,
                          QkvPrologueArgs<T> prologue, T* k_cache, T* v_cache) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ float warp_sums[kRopeThreads / kWarpSize];  // a pass's sums of squares, per warp
  const int64_t t = blockIdx.x;
  const int32_t half = head_dim / 2;
  const int32_t hw = (half + kWarpSize - 1) / kWarpSize * kWarpSize;
  const int32_t per_pass = kRopeThreads / hw;
  const int32_t sub = threadIdx.x / hw, i = threadIdx.x % hw;
  // Where hw does not divide the block (hw = 96: head_dim 130..192), the last threads have no
  // head: they only take part in the passes' barriers.
  const bool in_pass = sub < per_pass;
  const bool pair = in_pass && i < half;
  const int32_t total = num_heads + 2 * num_kv_heads;
  const int64_t width = static_cast<int64_t>(total) * head_dim;
  const int64_t slot = step.slot_mapping[t];
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int32_t i0 = interleaved ? 2 * i : i, i1 = interleaved ? 2 * i + 1 : i + half;
  float s = 0.0f, c = 1.0f;
  if (pair) sincosf(static_cast<float>(step.positions[t]) * inv_freq[i], &s, &c);
  const bool any_norm = prologue.q_norm != nullptr || prologue.k_norm != nullptr;
  const bool has_prologue = prologue.bias != nullptr || any_norm;
  // Every thread takes every pass (the norm's reduction needs the whole block).
  for (int32_t base = 0; base < total; base += per_pass) {
    const int32_t h = base + sub;
    const bool mine = pair && h < total;
    T* head = qkv + t * width + static_cast<int64_t>(mine ? h : 0) * head_dim;
    float x0 = mine ? to_float(head[i0]) : 0.0f, x1 = mine ? to_float(head[i1]) : 0.0f;
    if (prologue.bias != nullptr && mine) {
      const T* b = prologue.bias + static_cast<int64_t>(h) * head_dim;
      x0 += to_float(b[i0]);
      x1 += to_float(b[i1]);
    }
    if (any_norm) {
      // The head's sum of squares: each warp's, then the head's warps' in order (the same
      // rounding every run).
      float v = x0 * x0 + x1 * x1;
      for (int m = kWarpSize / 2; m > 0; m >>= 1) v += shfl_xor(v, m);
      if (threadIdx.x % kWarpSize == 0) warp_sums[threadIdx.x / kWarpSize] = v;
      __syncthreads();
      float sum_sq = 0.0f;
      for (int32_t w = sub * (hw / kWarpSize); in_pass && w < (sub + 1) * (hw / kWarpSize); ++w) {
        sum_sq += warp_sums[w];
      }
      __syncthreads();  // read before the next pass writes
      const T* norm = h < num_heads                  ? prologue.q_norm
                      : h < num_heads + num_kv_heads ? prologue.k_norm
                                                     : nullptr;
      if (norm != nullptr && mine) {
        const float inv_rms = rsqrtf(sum_sq / static_cast<float>(head_dim) + prologue.norm_eps);
        x0 *= inv_rms * (prologue.norm_offset + to_float(norm[i0]));
        x1 *= inv_rms * (prologue.norm_offset + to_float(norm[i1]));
      }
    }
    if (!mine) continue;
    if (has_prologue) {
      // q and v keep their prologue's result in the qkv rows; k is rewritten rotated below.
      head[i0] = from_float<T>(x0);
      head[i1] = from_float<T>(x1);
      x0 = to_float(head[i0]);
      x1 = to_float(head[i1]);
    }
    if (h < num_heads + num_kv_heads) {
      const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
      head[i0] = from_float<T>(r0);
      head[i1] = from_float<T>(r1);
      x0 = r0;
      x1 = r1;
    }
    if (h >= num_heads && slot >= 0) {
      const bool is_v = h >= num_heads + num_kv_heads;
      const int32_t kv_head = h - num_heads - (is_v ? num_kv_heads : 0);
      T* dst = (is_v ? v_cache : k_cache) + slot * kv_row + static_cast<int64_t>(kv_head) * head_dim;
      dst[i0] = from_float<T>(x0);
      dst[i1] = from_float<T>(x1);
    }
  }
}


// grid (n_tokens, n_heads), block kAttnWarps warps.
template <typename T>
__global__ void attention_kernel(const T* qkv, const T* k_cache, const T* v_cache,
                                 int32_t block_size, DeviceStep step, int32_t num_heads,
                                 int32_t num_kv_heads, int32_t head_dim, float scale,
                                 float softcap, int32_t window, bool skip_decode, T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ float q_s[kMaxHeadDim];
  __shared__ float m_s[kAttnWarps], l_s[kAttnWarps];
  __shared__ float acc_s[kAttnWarps][kMaxHeadDim];

  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int32_t kv_head = h / (num_heads / num_kv_heads);
  const int64_t width = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int32_t seq = step.seq_of[t];
  if (skip_decode && step.query_start[seq + 1] - step.query_start[seq] == 1) return;
  const int32_t* table = step.block_tables + static_cast<int64_t>(seq) * step.max_blocks;
  const int32_t n_keys = step.positions[t] + 1;  // causal by position
  // A sliding-window layer's query sees only the last `window` positions.
  const int32_t first_key = window > 0 && n_keys > window ? n_keys - window : 0;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;

  const T* q = qkv + t * width + static_cast<int64_t>(h) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) q_s[i] = to_float(q[i]) * scale;
  __syncthreads();

  float m = -FLT_MAX, l = 0.0f;
  float acc[kPerLane];
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) acc[k] = 0.0f;

  for (int32_t j = first_key + warp; j < n_keys; j += kAttnWarps) {
    const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
    const int64_t base = slot * kv_row + static_cast<int64_t>(kv_head) * head_dim;
    float dot = 0.0f;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < head_dim) dot += q_s[i] * to_float(k_cache[base + i]);
    }
    for (int s = kWarpSize / 2; s > 0; s >>= 1) dot += shfl_xor(dot, s);
    if (softcap > 0.0f) dot = softcap * tanhf(dot / softcap);
    const float m_new = fmaxf(m, dot);
    const float alpha = __expf(m - m_new), p = __expf(dot - m_new);
    l = l * alpha + p;
#pragma unroll
    for (int k = 0; k < kPerLane; ++k) {
      const int i = lane + k * kWarpSize;
      const float v = i < head_dim ? to_float(v_cache[base + i]) : 0.0f;
      acc[k] = acc[k] * alpha + p * v;
    }
    m = m_new;
  }

  if (lane == 0) {
    m_s[warp] = m;
    l_s[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < kPerLane; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < head_dim) acc_s[warp][i] = acc[k];
  }
  __syncthreads();

  float m_all = -FLT_MAX;
  for (int w = 0; w < kAttnWarps; ++w) m_all = fmaxf(m_all, m_s[w]);
  float denom = 0.0f;
  float weight[kAttnWarps];
  for (int w = 0; w < kAttnWarps; ++w) {
    weight[w] = l_s[w] > 0.0f ? __expf(m_s[w] - m_all) : 0.0f;
    denom += l_s[w] * weight[w];
  }
  T* o = out + t * static_cast<int64_t>(num_heads) * head_dim + static_cast<int64_t>(h) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) sum += acc_s[w][i] * weight[w];
    o[i] = from_float<T>(sum / denom);
  }
}

}  // namespace

template <typename T>
gpuError_t rope_and_cache(T* qkv, const float* inv_freq, const DeviceStep& step,
                          int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                          bool interleaved, const QkvPrologueArgs<T>& prologue, T* k_cache,
                          T* v_cache, gpuStream_t stream) {
  if (step.num_tokens <= 0) return gpuSuccess;
  if (head_dim / 2 > kRopeThreads) return gpuErrorInvalidValue;  // a thread per pair of a head
  return launch(rope_and_cache_kernel<T>, dim3(static_cast<unsigned>(step.num_tokens)),
                dim3(kRopeThreads), 0, stream, qkv, inv_freq, step, num_heads, num_kv_heads,
                head_dim, interleaved, prologue, k_cache, v_cache);
}

template <typename T>
gpuError_t attention_generic(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                             const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim, float scale, float softcap, int32_t window,
                             bool skip_decode, T* out, gpuStream_t stream) {
  if (step.num_tokens <= 0) return gpuSuccess;
  if (head_dim > kMaxHeadDim || num_kv_heads <= 0 || num_heads % num_kv_heads != 0) {
    return gpuErrorInvalidValue;
  }
  const dim3 grid(static_cast<unsigned>(step.num_tokens), static_cast<unsigned>(num_heads));
  return launch(attention_kernel<T>, grid, dim3(kAttnWarps * kWarpSize), 0, stream, qkv, k_cache,
                v_cache, block_size, step, num_heads, num_kv_heads, head_dim, scale, softcap, window,
                skip_decode, out);
}

#define TESSERA_ATTENTION_LAUNCHERS(T)                                                           \
  template gpuError_t rope_and_cache(T*, const float*, const DeviceStep&, int32_t, int32_t,       \
                                     int32_t, bool, const QkvPrologueArgs<T>&, T*, T*,            \
                                     gpuStream_t);                                                \
  template gpuError_t attention_generic(const T*, const T*, const T*, int32_t, const DeviceStep&, \
                                        int32_t, int32_t, int32_t, float, float, int32_t, bool,   \
                                        T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ATTENTION_LAUNCHERS)
#undef TESSERA_ATTENTION_LAUNCHERS

}  // namespace tessera::gpu
