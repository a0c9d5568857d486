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

#include "kernels/fp8_quantize.h"
#include "kernels/gpu_ops.h"
#include "kernels/launch.h"

namespace tessera::gpu {

namespace {

constexpr int kAttnWarps = 4;
constexpr int kPerLane = (kMaxHeadDim + kWarpSize - 1) / kWarpSize;

constexpr int kRopeThreads = 256;
// CTAs rope_and_cache aims for: a small batch's heads are spread over more CTAs until it has this
// many (twice an H100's 132 SMs, roughly), where one CTA per token would leave most SMs idle and
// walk a token's passes one after another (an 8B decode token's 48 heads in 12 passes: 8.9 us in
// one CTA on an H200).
constexpr int64_t kRopeTargetCtas = 256;

// The lanes one head of rope_and_cache_kernel takes (head_dim / 2 dimension pairs, rounded up to
// whole warps), and the heads one pass of its block covers: the kernel's layout and the
// launcher's grid both follow from these.
__host__ __device__ constexpr int32_t rope_head_lanes(int32_t head_dim) {
  return (head_dim / 2 + kWarpSize - 1) / kWarpSize * kWarpSize;
}
__host__ __device__ constexpr int32_t rope_heads_per_pass(int32_t head_dim) {
  return kRopeThreads / rope_head_lanes(head_dim);
}

// Where rope_and_cache_kernel writes k and v: T pools, or FP8 codes of x / scale (`codes` set).
template <typename T>
struct KvWriteArgs {
  T* k = nullptr;
  T* v = nullptr;
  uint8_t* k_codes = nullptr;
  uint8_t* v_codes = nullptr;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  Fp8Encoding encoding = Fp8Encoding::kE4M3FN;
  float* amax = nullptr;  // [2]: largest |k|, |v| written (a calibration step); null: not kept
};

// Pair (i0, i1) of a k or v head at element `base` of the cache: stored as T, or as FP8 codes of
// the values over the layer's scale (fp8_quantize.h's encoder: saturating, nearest even).
template <typename T>
__device__ __forceinline__ void write_kv_pair(const KvWriteArgs<T>& cache, bool is_v,
                                              int64_t base, int32_t i0, int32_t i1, float x0,
                                              float x1) {
  if (cache.amax != nullptr) {
    // Non-negative floats order like their bits.
    atomicMax(reinterpret_cast<unsigned int*>(cache.amax) + (is_v ? 1 : 0),
              __float_as_uint(fmaxf(fabsf(x0), fabsf(x1))));
  }
  if (cache.k_codes != nullptr) {
    uint8_t* dst = (is_v ? cache.v_codes : cache.k_codes) + base;
    const float scale = is_v ? cache.v_scale : cache.k_scale;
    dst[i0] = fp8_detail::encode_bits(cache.encoding, __float_as_uint(x0 / scale));
    dst[i1] = fp8_detail::encode_bits(cache.encoding, __float_as_uint(x1 / scale));
  } else {
    T* dst = (is_v ? cache.v : cache.k) + base;
    dst[i0] = from_float<T>(x0);
    dst[i1] = from_float<T>(x1);
  }
}

// grid (n_tokens, pass groups), block kRopeThreads: a token's heads in passes of
// rope_heads_per_pass heads, hw = rope_head_lanes(head_dim) lanes a head, each thread on one
// dimension pair of one head (pair i = thread % hw, when i < head_dim / 2); CTA (t, y) takes token t's passes
// y * passes_per_cta onwards. The pair's angle is computed once per thread and serves every head
// it visits (sincosf once per pair and pass slot, not per head). Applies the prologue (bias, q/k
// head norm: the head's sum of squares over its warps), rotates q and k heads in place, then
// writes k and v heads to the cache slot of the token (slots < 0 are padding: skipped).
// Dimension pair i of a head is (i, i + half), or (2i, 2i + 1) when `interleaved`.
template <typename T>
__global__ void __launch_bounds__(kRopeThreads)
    rope_and_cache_kernel(T* qkv, const float* inv_freq, DeviceStep step, int32_t num_heads,
                          int32_t num_kv_heads, int32_t head_dim, bool interleaved,
                          int32_t passes_per_cta, QkvPrologueArgs<T> prologue,
                          KvWriteArgs<T> cache) {
  __shared__ float warp_sums[kRopeThreads / kWarpSize];  // a pass's sums of squares, per warp
  const int64_t t = blockIdx.x;
  const int32_t half = head_dim / 2;
  const int32_t hw = rope_head_lanes(head_dim);
  const int32_t per_pass = rope_heads_per_pass(head_dim);
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
  // The angles come from the step's metadata and the frequencies, which no kernel writes: computed
  // while the previous kernel (which wrote qkv) ends (launch.h).
  wait_for_prior_kernels();
  let_next_kernel_start();
  const bool any_norm = prologue.q_norm != nullptr || prologue.k_norm != nullptr;
  const bool has_prologue = prologue.bias != nullptr || any_norm;
  // Every thread takes every pass of the CTA (the norm's reduction needs the whole block).
  const int32_t first = static_cast<int32_t>(blockIdx.y) * passes_per_cta * per_pass;
  const int32_t end = min(total, first + passes_per_cta * per_pass);
  for (int32_t base = first; base < end; base += per_pass) {
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
      write_kv_pair(cache, is_v, slot * kv_row + static_cast<int64_t>(kv_head) * head_dim, i0, i1,
                    x0, x1);
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

constexpr int kWidenThreads = 256;
constexpr int kWidenCodes = 8;  // per thread and pass: one 8-byte load, one 16-byte store

// grid (context blocks of the longest sequence, prefill sequences), kWidenThreads threads: block
// b of prefill sequence z, K and V, from its cache block to its scratch block. Whole blocks are
// copied: the positions past the context in a last block are never attended.
template <typename T>
__global__ void __launch_bounds__(kWidenThreads)
    widen_kv_context_kernel(const uint8_t* __restrict__ k_codes,
                            const uint8_t* __restrict__ v_codes, float k_scale, float v_scale,
                            Fp8Encoding enc, int32_t block_size, DeviceStep step,
                            const int32_t* __restrict__ scratch_tables, int64_t kv_row,
                            T* __restrict__ k_out, T* __restrict__ v_out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  const int32_t seq = step.prefill_seqs[blockIdx.y];
  const int32_t b = blockIdx.x;
  if (static_cast<int64_t>(b) * block_size >= step.context_len[seq]) return;
  const int64_t row = static_cast<int64_t>(seq) * step.max_blocks + b;
  const int64_t block_elems = static_cast<int64_t>(block_size) * kv_row;
  const int64_t src = step.block_tables[row] * block_elems;
  const int64_t dst = scratch_tables[row] * block_elems;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidenCodes; i < 2 * block_elems;
       i += static_cast<int64_t>(kWidenThreads) * kWidenCodes) {
    const bool is_v = i >= block_elems;
    const int64_t e = is_v ? i - block_elems : i;
    const uint2 raw = *reinterpret_cast<const uint2*>((is_v ? v_codes : k_codes) + src + e);
    const float scale = is_v ? v_scale : k_scale;
    const uint32_t words[2] = {raw.x, raw.y};
    uint32_t packed[4];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      const uint32_t q = words[w];
      packed[2 * w] = Element<T>::pack(fp8_e4m3_value(q & 0xffu, enc) * scale,
                                       fp8_e4m3_value((q >> 8) & 0xffu, enc) * scale);
      packed[2 * w + 1] = Element<T>::pack(fp8_e4m3_value((q >> 16) & 0xffu, enc) * scale,
                                           fp8_e4m3_value(q >> 24, enc) * scale);
    }
    *reinterpret_cast<uint4*>((is_v ? v_out : k_out) + dst + e) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

}  // namespace

template <typename T>
gpuError_t widen_kv_context(const Fp8KvPools& pools, int32_t block_size, const DeviceStep& step,
                            int32_t max_context, const int32_t* scratch_tables,
                            int32_t num_kv_heads, int32_t head_dim, T* k_out, T* v_out,
                            gpuStream_t stream) {
  if (step.num_prefill_seqs <= 0 || max_context <= 0) return gpuSuccess;
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * head_dim;
  // 8-code loads and 16-byte stores stay inside one K or V block.
  if (kv_row % kWidenCodes != 0) return gpuErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>((max_context + block_size - 1) / block_size),
                  static_cast<unsigned>(step.num_prefill_seqs));
  return launch(widen_kv_context_kernel<T>, grid, dim3(kWidenThreads), 0, stream, pools.k,
                pools.v, pools.k_scale, pools.v_scale, pools.encoding,
                block_size, step, scratch_tables, kv_row, k_out, v_out);
}

template <typename T>
gpuError_t rope_and_cache(T* qkv, const float* inv_freq, const DeviceStep& step,
                          int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                          bool interleaved, const QkvPrologueArgs<T>& prologue,
                          const KvCacheWrite<T>& cache, gpuStream_t stream) {
  if (step.num_tokens <= 0) return gpuSuccess;
  if (head_dim / 2 > kRopeThreads) return gpuErrorInvalidValue;  // a thread per pair of a head
  if (head_dim < 2 || num_heads <= 0 || num_kv_heads < 0) return gpuErrorInvalidValue;
  KvWriteArgs<T> args;
  args.amax = cache.amax;
  if (cache.codes != nullptr) {
    // The kernel writes through these; Fp8KvPools holds them const for the readers.
    args.k_codes = const_cast<uint8_t*>(cache.codes->k);
    args.v_codes = const_cast<uint8_t*>(cache.codes->v);
    args.k_scale = cache.codes->k_scale;
    args.v_scale = cache.codes->v_scale;
    args.encoding = cache.codes->encoding;
  } else {
    args.k = cache.k;
    args.v = cache.v;
  }
  // The kernel's passes (see there), grouped so that the grid has about kRopeTargetCtas CTAs.
  const int32_t per_pass = rope_heads_per_pass(head_dim);
  const int64_t passes = (num_heads + 2 * num_kv_heads + per_pass - 1) / per_pass;
  const int64_t groups_wanted = (kRopeTargetCtas + step.num_tokens - 1) / step.num_tokens;
  const int64_t passes_per_cta = (passes + groups_wanted - 1) / groups_wanted;
  const int64_t groups = (passes + passes_per_cta - 1) / passes_per_cta;
  return launch(rope_and_cache_kernel<T>,
                dim3(static_cast<unsigned>(step.num_tokens), static_cast<unsigned>(groups)),
                dim3(kRopeThreads), 0, stream, qkv, inv_freq, step, num_heads, num_kv_heads,
                head_dim, interleaved, static_cast<int32_t>(passes_per_cta), prologue, args);
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
                                     int32_t, bool, const QkvPrologueArgs<T>&,                    \
                                     const KvCacheWrite<T>&, gpuStream_t);                        \
  template gpuError_t widen_kv_context(const Fp8KvPools&, int32_t, const DeviceStep&, int32_t,    \
                                       const int32_t*, int32_t, int32_t, T*, T*, gpuStream_t);    \
  template gpuError_t attention_generic(const T*, const T*, const T*, int32_t, const DeviceStep&, \
                                        int32_t, int32_t, int32_t, float, float, int32_t, bool,   \
                                        T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ATTENTION_LAUNCHERS)
#undef TESSERA_ATTENTION_LAUNCHERS

}  // namespace tessera::gpu
