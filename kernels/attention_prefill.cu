// Prefill attention, FlashAttention-2 style: one CTA per (128-query tile, query head, prefill
// sequence); 8 warps of 16 query rows each; K/V tiles of 64 keys gathered from the paged cache
// into swizzled shared memory by cp.async (V of tile j loads while S = Q K^T of tile j runs, K
// of tile j+1 while P V of tile j runs); bf16 m16n8k16 tensor-core MMAs with fp32 accumulation;
// online softmax in fp32 registers (exp2 with the scale folded into log2 e). A varlen batch:
// each sequence's new queries sit at query_start[s]..query_start[s+1] in qkv and at positions
// context_len - q_len .. context_len - 1, so chunked prefill attends to the chunks before it.
//
// CUDA only (PTX mma.sync/ldmatrix/cp.async). HIP builds answer prefill_kernel_supported() with
// false and run the generic kernel of attention.cu instead: the MFMA version is not written yet.
#define TESSERA_GPU_KERNELS_ONLY
#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/gpu_ops.h"
#include "kernels/mma_sm80.h"

namespace tessera::gpu {

#if defined(TESSERA_CUDA)

namespace {

constexpr int kBlockM = 128;  // queries per CTA (64 with 4 warps measured 25% slower on H100)
constexpr int kBlockN = 64;   // keys per tile
constexpr int kWarps = kBlockM / 16;
constexpr int kThreads = kWarps * 32;

// Element offset of 16-byte chunk c of row r in a tile of D-element rows; the XOR swizzle puts
// the 8 rows an ldmatrix reads at one logical chunk into 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    prefill_kernel(const gpu_bf16* __restrict__ qkv, const gpu_bf16* __restrict__ k_cache,
                   const gpu_bf16* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                   int32_t num_heads, int32_t num_kv_heads, float scale_log2, bool causal,
                   gpu_bf16* __restrict__ out) {
  constexpr int kChunks = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  gpu_bf16* sQ = reinterpret_cast<gpu_bf16*>(smem_raw);
  gpu_bf16* sK = sQ + kBlockM * D;
  gpu_bf16* sV = sK + kBlockN * D;

  const int seq = step.prefill_seqs[blockIdx.z];
  const int h = blockIdx.y;
  const int qt = gridDim.x - 1 - blockIdx.x;  // the longest (last) tiles start first
  const int q_begin = step.query_start[seq];
  const int q_len = step.query_start[seq + 1] - q_begin;
  if (qt * kBlockM >= q_len) return;
  const int ctx = step.context_len[seq];
  const int ctx_start = ctx - q_len;
  const int kvh = h / (num_heads / num_kv_heads);
  const int64_t qkv_stride = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * D;
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * D;
  const int32_t* table = step.block_tables + static_cast<int64_t>(seq) * step.max_blocks;
  const int rows = min(kBlockM, q_len - qt * kBlockM);
  const int first_pos = ctx_start + qt * kBlockM;
  const int n_keys = causal ? first_pos + rows : ctx;
  const int n_tiles = (n_keys + kBlockN - 1) / kBlockN;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const gpu_bf16* q_base =
      qkv + static_cast<int64_t>(q_begin + qt * kBlockM) * qkv_stride + static_cast<int64_t>(h) * D;
  for (int i = tid; i < kBlockM * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < rows;
    sm80::cp_async_16(sQ + swz<D>(r, c), ok ? q_base + r * qkv_stride + c * 8 : q_base, ok ? 16 : 0);
  }
  // Keys past n_keys are zero-filled: their scores are masked, and zeros keep P V finite.
  auto load_tile = [&](gpu_bf16* dst, const gpu_bf16* cache, int tile) {
    for (int i = tid; i < kBlockN * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const int j = tile * kBlockN + r;
      const gpu_bf16* src = cache;
      if (j < n_keys) {
        const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
        src = cache + slot * kv_row + static_cast<int64_t>(kvh) * D + c * 8;
      }
      sm80::cp_async_16(dst + swz<D>(r, c), src, j < n_keys ? 16 : 0);
    }
  };
  load_tile(sK, k_cache, 0);
  sm80::cp_async_commit();
  sm80::cp_async_wait_all();
  __syncthreads();

  const int mi = lane / 8;  // which of ldmatrix's four matrices this lane addresses
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    sm80::ldmatrix_x4(qf[kk], sQ + swz<D>(warp * 16 + (mi % 2) * 8 + lane % 8, kk * 2 + mi / 2));
  }

  const int g = lane / 4, t = lane % 4;
  const int row0 = qt * kBlockM + warp * 16 + g;  // this lane's two rows: row0 and row0 + 8
  const int qpos0 = ctx_start + row0, qpos1 = qpos0 + 8;
  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int tile = 0; tile < n_tiles; ++tile) {
    load_tile(sV, v_cache, tile);
    sm80::cp_async_commit();

    float s[kBlockN / 8][4];
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        sm80::ldmatrix_x4(b, sK + swz<D>(np * 16 + (mi / 2) * 8 + lane % 8, kk * 2 + mi % 2));
        sm80::mma_bf16_16816(s[2 * np], qf[kk], b[0], b[1]);
        sm80::mma_bf16_16816(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    const int key_base = tile * kBlockN;
    if (key_base + kBlockN > n_keys || (causal && key_base + kBlockN - 1 > first_pos)) {
#pragma unroll
      for (int n = 0; n < kBlockN / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key_base + n * 8 + 2 * t + e;
          if (key >= ctx || (causal && key > qpos0)) s[n][e] = -INFINITY;
          if (key >= ctx || (causal && key > qpos1)) s[n][2 + e] = -INFINITY;
        }
      }
    }

    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
      mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]));
      mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]));
    }
    mx0 = fmaxf(mx0, shfl_xor(mx0, 1));
    mx0 = fmaxf(mx0, shfl_xor(mx0, 2));
    mx1 = fmaxf(mx1, shfl_xor(mx1, 1));
    mx1 = fmaxf(mx1, shfl_xor(mx1, 2));
    // A row with every key so far masked keeps max -inf: subtract 0 instead (no inf - inf).
    const float base0 = mx0 == -INFINITY ? 0.0f : mx0 * scale_log2;
    const float base1 = mx1 == -INFINITY ? 0.0f : mx1 * scale_log2;
    const float alpha0 = exp2f(m0 * scale_log2 - base0), alpha1 = exp2f(m1 * scale_log2 - base1);
    m0 = mx0;
    m1 = mx1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) {
      s[n][0] = exp2f(s[n][0] * scale_log2 - base0);
      s[n][1] = exp2f(s[n][1] * scale_log2 - base0);
      s[n][2] = exp2f(s[n][2] * scale_log2 - base1);
      s[n][3] = exp2f(s[n][3] * scale_log2 - base1);
      sum0 += s[n][0] + s[n][1];
      sum1 += s[n][2] + s[n][3];
    }
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      o[d][0] *= alpha0;
      o[d][1] *= alpha0;
      o[d][2] *= alpha1;
      o[d][3] *= alpha1;
    }

    sm80::cp_async_wait_all();
    __syncthreads();  // V of this tile landed; every warp is done reading K
    if (tile + 1 < n_tiles) {
      load_tile(sK, k_cache, tile + 1);
      sm80::cp_async_commit();
    }

#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]),
                             pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        sm80::ldmatrix_x4_trans(b, sV + swz<D>(kk * 16 + (mi % 2) * 8 + lane % 8, dp * 2 + mi / 2));
        sm80::mma_bf16_16816(o[2 * dp], a, b[0], b[1]);
        sm80::mma_bf16_16816(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    sm80::cp_async_wait_all();
    __syncthreads();  // K of the next tile landed; every warp is done reading V
  }

  l0 += shfl_xor(l0, 1);
  l0 += shfl_xor(l0, 2);
  l1 += shfl_xor(l1, 1);
  l1 += shfl_xor(l1, 2);
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const int64_t out_stride = static_cast<int64_t>(num_heads) * D;
  gpu_bf16* o0 = out + (q_begin + row0) * out_stride + static_cast<int64_t>(h) * D + 2 * t;
  gpu_bf16* o1 = o0 + 8 * out_stride;
  const bool write0 = row0 < q_len, write1 = row0 + 8 < q_len;
#pragma unroll
  for (int d = 0; d < D / 8; ++d) {
    if (write0) *reinterpret_cast<uint32_t*>(o0 + d * 8) = pack_bf16x2(o[d][0] * inv0, o[d][1] * inv0);
    if (write1) *reinterpret_cast<uint32_t*>(o1 + d * 8) = pack_bf16x2(o[d][2] * inv1, o[d][3] * inv1);
  }
}

template <int D>
gpuError_t launch_prefill(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                          int32_t block_size, const DeviceStep& step, int32_t num_heads,
                          int32_t num_kv_heads, float scale, bool causal, gpu_bf16* out,
                          gpuStream_t stream) {
  const int smem = (kBlockM + 2 * kBlockN) * D * static_cast<int>(sizeof(gpu_bf16));
  // More than 48 KiB of dynamic shared memory must be allowed once per device, not per launch.
  static std::atomic<uint64_t> allowed_on{0};  // bit d: done on device d (d < 64)
  int device = 0;
  gpuError_t err = cudaGetDevice(&device);
  if (err != gpuSuccess) return err;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (allowed_on.load(std::memory_order_acquire) & bit) == 0) {
    err = cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != gpuSuccess) return err;
    allowed_on.fetch_or(bit, std::memory_order_release);
  }
  const dim3 grid((step.max_prefill_q + kBlockM - 1) / kBlockM, num_heads, step.num_prefill_seqs);
  prefill_kernel<D><<<grid, kThreads, smem, stream>>>(qkv, k_cache, v_cache, block_size, step,
                                                       num_heads, num_kv_heads,
                                                       scale * 1.4426950408889634f, causal, out);
  return gpuGetLastError();
}

}  // namespace

bool prefill_kernel_supported(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

gpuError_t attention_prefill(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                             int32_t block_size, const DeviceStep& step, int32_t num_heads,
                             int32_t num_kv_heads, int32_t head_dim, float scale, bool causal,
                             gpu_bf16* out, gpuStream_t stream) {
  if (step.num_prefill_seqs <= 0) return gpuSuccess;
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) return gpuErrorInvalidValue;
  switch (head_dim) {
    case 64:
      return launch_prefill<64>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                                scale, causal, out, stream);
    case 128:
      return launch_prefill<128>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                                 scale, causal, out, stream);
    default:
      return gpuErrorInvalidValue;
  }
}

#else  // HIP: no tensor-core prefill yet

bool prefill_kernel_supported(int32_t) { return false; }

gpuError_t attention_prefill(const gpu_bf16*, const gpu_bf16*, const gpu_bf16*, int32_t,
                             const DeviceStep&, int32_t, int32_t, int32_t, float, bool, gpu_bf16*,
                             gpuStream_t) {
  return gpuErrorInvalidValue;
}

#endif

}  // namespace tessera::gpu
