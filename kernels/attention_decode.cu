// Decode attention over the paged cache, flash-decoding style: each sequence's keys are cut into
// splits; one CTA per (split, KV head, decode sequence) loads each key and value of its split
// once for all the query heads that share that KV head (GQA grouping), with an online softmax per
// head; a combine kernel merges the splits' (max, sum, accumulator) triples. When one split
// covers every sequence, the CTA writes the output itself and no combine runs.
//
// Lanes work in groups of head_dim / 8, one key per group at a time, 16-byte loads (a key row
// is one contiguous run of the group's loads), four keys in flight per group. Written with
// kWarpSize and group-local shuffles only, so the same source runs on 64-lane CDNA wavefronts.
#define TESSERA_GPU_KERNELS_ONLY
#include <algorithm>
#include <cmath>

#include "kernels/gpu_ops.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;  // keys in flight per lane group

template <int D, int kMaxGroup>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const gpu_bf16* __restrict__ qkv, const gpu_bf16* __restrict__ k_cache,
                  const gpu_bf16* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                  int32_t num_heads, int32_t num_kv_heads, float scale_log2,
                  int32_t keys_per_split, float* __restrict__ part_acc,
                  float* __restrict__ part_ml, gpu_bf16* __restrict__ out) {
  constexpr int kLanes = D / 8;              // lanes per key
  constexpr int kGroups = kThreads / kLanes;  // keys processed side by side
  __shared__ float s_m[kGroups][kMaxGroup], s_l[kGroups][kMaxGroup];
  __shared__ float s_acc[kGroups][kMaxGroup][D];

  const int split = blockIdx.x, num_splits = gridDim.x;
  const int kvh = blockIdx.y;
  const int dseq = blockIdx.z;
  const int seq = step.decode_seqs[dseq];
  const int group = num_heads / num_kv_heads;
  const int tok = step.query_start[seq];
  const int n_keys = step.positions[tok] + 1;
  const int k_begin = split * keys_per_split;
  const int k_end = min(n_keys, k_begin + keys_per_split);
  const int grp = threadIdx.x / kLanes, gl = threadIdx.x % kLanes;
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * D;
  const int32_t* table = step.block_tables + static_cast<int64_t>(seq) * step.max_blocks;

  const int64_t qkv_stride = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * D;
  float q[kMaxGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (g < group) {
      raw = *reinterpret_cast<const uint4*>(qkv + tok * qkv_stride +
                                            static_cast<int64_t>(kvh * group + g) * D + gl * 8);
    }
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      q[g][2 * e] = bf16_lo(w[e]) * scale_log2;
      q[g][2 * e + 1] = bf16_hi(w[e]) * scale_log2;
    }
  }

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][8];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
  }

  // The trip count is the CTA's, not the group's: every lane of a warp must reach the shuffles.
  for (int base = k_begin; base < k_end; base += kGroups * kUnroll) {
    const int j0 = base + grp;
    uint4 kr[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kGroups;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (j < k_end) {
        const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
        const int64_t off = slot * kv_row + static_cast<int64_t>(kvh) * D + gl * 8;
        kr[u] = *reinterpret_cast<const uint4*>(k_cache + off);
        vr[u] = *reinterpret_cast<const uint4*>(v_cache + off);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool valid = j0 + u * kGroups < k_end;
      const uint32_t kw[4] = {kr[u].x, kr[u].y, kr[u].z, kr[u].w};
      const uint32_t vw[4] = {vr[u].x, vr[u].y, vr[u].z, vr[u].w};
      float kf[8], vf[8];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        kf[2 * e] = bf16_lo(kw[e]);
        kf[2 * e + 1] = bf16_hi(kw[e]);
        vf[2 * e] = bf16_lo(vw[e]);
        vf[2 * e + 1] = bf16_hi(vw[e]);
      }
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[g][e] * kf[e];
        // Every lane shuffles (no divergence around the shuffles); groups are aligned runs.
#pragma unroll
        for (int s = kLanes / 2; s > 0; s >>= 1) dot += shfl_xor(dot, s);
        if (valid && g < group) {
          const float m_new = fmaxf(m[g], dot);
          const float alpha = exp2f(m[g] - m_new), p = exp2f(dot - m_new);
          l[g] = l[g] * alpha + p;
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = acc[g][e] * alpha + p * vf[e];
          m[g] = m_new;
        }
      }
    }
  }

#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (gl == 0) {
      s_m[grp][g] = m[g];
      s_l[grp][g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) s_acc[grp][g][gl * 8 + e] = acc[g][e];
  }
  __syncthreads();

  const int64_t out_stride = static_cast<int64_t>(num_heads) * D;
  for (int idx = threadIdx.x; idx < group * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
    for (int r = 0; r < kGroups; ++r) mx = fmaxf(mx, s_m[r][g]);
    float sum = 0.0f, a = 0.0f;
    if (mx != -INFINITY) {
      for (int r = 0; r < kGroups; ++r) {
        if (s_m[r][g] == -INFINITY) continue;
        const float w = exp2f(s_m[r][g] - mx);
        sum += s_l[r][g] * w;
        a += s_acc[r][g][d] * w;
      }
    }
    const int h = kvh * group + g;
    if (num_splits == 1) {
      out[tok * out_stride + static_cast<int64_t>(h) * D + d] = __float2bfloat16(a / sum);
    } else {
      const int64_t part = (static_cast<int64_t>(dseq) * num_heads + h) * num_splits + split;
      part_acc[part * D + d] = a;
      if (d == 0) {
        part_ml[2 * part] = mx;
        part_ml[2 * part + 1] = sum;
      }
    }
  }
}

// grid (num_decode_seqs, num_heads), block head_dim threads.
__global__ void combine_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                               DeviceStep step, int32_t num_heads, int32_t head_dim,
                               int32_t num_splits, gpu_bf16* __restrict__ out) {
  const int dseq = blockIdx.x, h = blockIdx.y, d = threadIdx.x;
  const int tok = step.query_start[step.decode_seqs[dseq]];
  const int64_t base = (static_cast<int64_t>(dseq) * num_heads + h) * num_splits;
  float mx = -INFINITY;
  for (int s = 0; s < num_splits; ++s) mx = fmaxf(mx, part_ml[2 * (base + s)]);
  float sum = 0.0f, a = 0.0f;
  for (int s = 0; s < num_splits; ++s) {
    const float ms = part_ml[2 * (base + s)];
    if (ms == -INFINITY) continue;
    const float w = exp2f(ms - mx);
    sum += part_ml[2 * (base + s) + 1] * w;
    a += part_acc[(base + s) * head_dim + d] * w;
  }
  out[tok * static_cast<int64_t>(num_heads) * head_dim + static_cast<int64_t>(h) * head_dim + d] =
      __float2bfloat16(a / sum);
}

template <int D, int kMaxGroup>
gpuError_t launch_decode(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                         int32_t block_size, const DeviceStep& step, int32_t num_heads,
                         int32_t num_kv_heads, float scale, const DecodeSplits& splits,
                         float* part_acc, float* part_ml, gpu_bf16* out, gpuStream_t stream) {
  const dim3 grid(splits.num_splits, num_kv_heads, step.num_decode_seqs);
  decode_kernel<D, kMaxGroup><<<grid, kThreads, 0, stream>>>(
      qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
      scale * 1.4426950408889634f, splits.keys_per_split, part_acc, part_ml, out);
  gpuError_t err = gpuGetLastError();
  if (err != gpuSuccess || splits.num_splits == 1) return err;
  combine_kernel<<<dim3(step.num_decode_seqs, num_heads), D, 0, stream>>>(
      part_acc, part_ml, step, num_heads, D, splits.num_splits, out);
  return gpuGetLastError();
}

template <int D>
gpuError_t dispatch_group(int group, const gpu_bf16* qkv, const gpu_bf16* k_cache,
                          const gpu_bf16* v_cache, int32_t block_size, const DeviceStep& step,
                          int32_t num_heads, int32_t num_kv_heads, float scale,
                          const DecodeSplits& splits, float* part_acc, float* part_ml,
                          gpu_bf16* out, gpuStream_t stream) {
  if (group <= 1) {
    return launch_decode<D, 1>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                               scale, splits, part_acc, part_ml, out, stream);
  }
  if (group <= 2) {
    return launch_decode<D, 2>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                               scale, splits, part_acc, part_ml, out, stream);
  }
  if (group <= 4) {
    return launch_decode<D, 4>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                               scale, splits, part_acc, part_ml, out, stream);
  }
  return launch_decode<D, 8>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                             scale, splits, part_acc, part_ml, out, stream);
}

}  // namespace

bool decode_kernel_supported(int32_t head_dim, int32_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kMaxDecodeGroup;
}

DecodeSplits plan_decode_splits(int32_t num_decode_seqs, int32_t num_kv_heads,
                                int32_t max_context, int32_t multiprocessors) {
  DecodeSplits p;
  if (num_decode_seqs <= 0 || max_context <= 0) return p;
  // Enough CTAs for four waves over the multiprocessors (memory parallelism), but no split under
  // kMinKeysPerSplit keys.
  const int64_t ctas = static_cast<int64_t>(num_decode_seqs) * num_kv_heads;
  const int64_t wanted = (4 * static_cast<int64_t>(multiprocessors) + ctas - 1) / ctas;
  const int64_t most = (max_context + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  const int64_t splits = std::max<int64_t>(1, std::min({wanted, most, int64_t{kMaxDecodeSplits}}));
  int64_t per = (max_context + splits - 1) / splits;
  per = (per + 63) / 64 * 64;
  p.keys_per_split = static_cast<int32_t>(per);
  p.num_splits = static_cast<int32_t>((max_context + per - 1) / per);
  return p;
}

gpuError_t attention_decode(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                            int32_t block_size, const DeviceStep& step, int32_t num_heads,
                            int32_t num_kv_heads, int32_t head_dim, float scale,
                            const DecodeSplits& splits, float* part_acc, float* part_ml,
                            gpu_bf16* out, gpuStream_t stream) {
  if (step.num_decode_seqs <= 0) return gpuSuccess;
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || splits.num_splits < 1) {
    return gpuErrorInvalidValue;
  }
  const int group = num_heads / num_kv_heads;
  if (!decode_kernel_supported(head_dim, group)) return gpuErrorInvalidValue;
  if (head_dim == 64) {
    return dispatch_group<64>(group, qkv, k_cache, v_cache, block_size, step, num_heads,
                              num_kv_heads, scale, splits, part_acc, part_ml, out, stream);
  }
  return dispatch_group<128>(group, qkv, k_cache, v_cache, block_size, step, num_heads,
                             num_kv_heads, scale, splits, part_acc, part_ml, out, stream);
}

}  // namespace tessera::gpu
