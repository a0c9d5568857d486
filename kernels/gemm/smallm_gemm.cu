// The small-M kernels (see smallm_gemm.h).
//
// Fragment trick of the mma kernels: a dot product does not care in which order k is summed, so
// lane (g = lane / 4, t = lane % 4) loads 16 contiguous bytes -- k = 8t .. 8t+7 of a 32-wide k
// chunk -- of w rows g and g + 8 and of x tokens g and g + 8, and uses them as they are: the
// first two bf16 pairs are the A/B fragment registers of one m16n8k16 (logical k 2t, 2t+8 map to
// physical 8t, 8t+2), the last two pairs those of a second one. A and B agree on the
// permutation, so the products are those of the true GEMM, with no shared-memory staging and
// no ldmatrix.
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gemm/smallm_gemm.h"

#include <algorithm>

#include "kernels/mma_sm80.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kMaxSplits = 16;
// Two CTAs per SM at least: with no minimum, ptxas capped two of the kernels at 48 and 64
// registers and spilled (CUDA 13.0, sm_90a); the hint gives them up to 128.
constexpr int kMinBlocks = 2;
// Split ranges are whole multiples of every kernel's k per step (8 warps x 32 for the mma
// kernels; lanes x 8, up to 512 with 64-lane wavefronts, for the FMA kernel), so that no split
// ends inside another's step. Splits that start past k are empty: their partials are zeros.
constexpr int64_t kSplitAlign = 512;

__device__ __forceinline__ void store(void* out, bool out_f32, int64_t i, float v) {
  if (out_f32) {
    static_cast<float*>(out)[i] = v;
  } else {
    static_cast<gpu_bf16*>(out)[i] = __float2bfloat16(v);
  }
}

// One output element: straight to out when k is not split (gridDim.y == 1), else to this
// CTA's split of the partials [splits, m, n].
__device__ __forceinline__ void store_result(void* out, bool out_f32, float* partial, int64_t mn,
                                             int64_t i, float v) {
  if (gridDim.y > 1) {
    partial[blockIdx.y * mn + i] = v;
  } else {
    store(out, out_f32, i, v);
  }
}

#if defined(TESSERA_CUDA)

// w is read exactly once: keep it out of L1 so that x (re-read by every CTA) stays there.
__device__ __forceinline__ uint4 load_once(const gpu_bf16* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// kRowTiles 16-row tiles of w per CTA (every warp works on all of them, over its share of k);
// kUnroll 32-wide k chunks in flight per warp. More rows per CTA re-read x (through L1/L2) less
// often per byte of w, which counts at m > 8, where x is as wide as a 16-row tile of w.
template <int kRowTiles, int kUnroll>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    smallm_mma_kernel(const gpu_bf16* __restrict__ x, const gpu_bf16* __restrict__ w,
                      void* __restrict__ out, bool out_f32, float* __restrict__ partial,
                      int32_t m, int32_t n, int32_t k, int32_t k_per_split) {
  constexpr int kRows = 16 * kRowTiles;
  constexpr int kStep = kWarps * 32;       // k the CTA's warps cover per chunk
  // Each warp's partial sums, token-major so that the final pass reads and writes rows in order.
  __shared__ float partial_sums[kWarps][kSmallMMaxTokens][kRows];

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int32_t k_begin = static_cast<int32_t>(blockIdx.y) * k_per_split;
  const int32_t k_end = min(k, k_begin + k_per_split);
  const bool two_token_tiles = m > 8;

  const gpu_bf16* w_row[kRowTiles][2];
  bool w_ok[kRowTiles][2];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + r * 16 + h * 8 + g;
      w_ok[r][h] = row < n;
      w_row[r][h] = w + (w_ok[r][h] ? row : 0) * k;
    }
  }
  const gpu_bf16* x_row[2] = {x + static_cast<int64_t>(min(g, m - 1)) * k,
                              x + static_cast<int64_t>(min(g + 8, m - 1)) * k};
  const bool x_ok[2] = {g < m, two_token_tiles && g + 8 < m};

  float acc[kRowTiles][2][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // The loop bound is the same for every lane of the warp (mma.sync needs the whole warp).
  for (int32_t base = k_begin + warp * 32; base < k_end; base += kStep * kUnroll) {
    uint4 a[kUnroll][kRowTiles][2], b[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t kk = base + u * kStep + t * 8;
      const bool in = kk < k_end;
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) a[u][r][h] = in && w_ok[r][h] ? load_once(w_row[r][h] + kk) : zero;
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        b[u][nt] = in && x_ok[nt] ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + kk)) : zero;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
        const uint32_t lo[4] = {a[u][r][0].x, a[u][r][1].x, a[u][r][0].y, a[u][r][1].y};
        const uint32_t hi[4] = {a[u][r][0].z, a[u][r][1].z, a[u][r][0].w, a[u][r][1].w};
        sm80::mma_bf16_16816(acc[r][0], lo, b[u][0].x, b[u][0].y);
        sm80::mma_bf16_16816(acc[r][0], hi, b[u][0].z, b[u][0].w);
        if (two_token_tiles) {
          sm80::mma_bf16_16816(acc[r][1], lo, b[u][1].x, b[u][1].y);
          sm80::mma_bf16_16816(acc[r][1], hi, b[u][1].z, b[u][1].w);
        }
      }
    }
  }

  // Accumulator fragment: c0, c1 at (row g, tokens 2t, 2t+1), c2, c3 at row g + 8.
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial_sums[warp][nt * 8 + 2 * t + (i & 1)][r * 16 + g + (i >= 2 ? 8 : 0)] = acc[r][nt][i];
      }
    }
  }
  __syncthreads();
  const int64_t mn = static_cast<int64_t>(m) * n;
  for (int i = threadIdx.x; i < m * kRows; i += kThreads) {
    const int tok = i / kRows, rl = i % kRows;
    const int64_t row = row0 + rl;
    if (row >= n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial_sums[v][tok][rl];
    store_result(out, out_f32, partial, mn, tok * static_cast<int64_t>(n) + row, sum);
  }
}

#endif  // TESSERA_CUDA

constexpr int kFmaRows = 2;  // rows of w per warp

__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  f[0] = bf16_lo(v.x), f[1] = bf16_hi(v.x), f[2] = bf16_lo(v.y), f[3] = bf16_hi(v.y);
  f[4] = bf16_lo(v.z), f[5] = bf16_hi(v.z), f[6] = bf16_lo(v.w), f[7] = bf16_hi(v.w);
}

__global__ void __launch_bounds__(kThreads, kMinBlocks)
    smallm_fma_kernel(const gpu_bf16* __restrict__ x, const gpu_bf16* __restrict__ w,
                      void* __restrict__ out, bool out_f32, float* __restrict__ partial,
                      int32_t m, int32_t n, int32_t k, int32_t k_per_split) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kFmaRows;
  if (row0 >= n) return;  // the whole warp: no shuffle below is left waiting
  const int32_t k_begin = static_cast<int32_t>(blockIdx.y) * k_per_split;
  const int32_t k_end = min(k, k_begin + k_per_split);

  float acc[kFmaRows][kSmallMMaxTokens] = {};
  for (int32_t kk = k_begin + lane * 8; kk < k_end; kk += kWarpSize * 8) {
    float wf[kFmaRows][8];
#pragma unroll
    for (int r = 0; r < kFmaRows; ++r) {
      const int64_t row = row0 + r < n ? row0 + r : row0;
      unpack8(*reinterpret_cast<const uint4*>(w + row * k + kk), wf[r]);
    }
    // Guarded rather than cut short with break, so that both compilers unroll the loop and
    // acc stays in registers.
#pragma unroll
    for (int tok = 0; tok < kSmallMMaxTokens; ++tok) {
      if (tok < m) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4*>(x + static_cast<int64_t>(tok) * k + kk), xf);
#pragma unroll
        for (int r = 0; r < kFmaRows; ++r) {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r][tok] += wf[r][j] * xf[j];
        }
      }
    }
  }
  const int64_t mn = static_cast<int64_t>(m) * n;
#pragma unroll
  for (int r = 0; r < kFmaRows; ++r) {
#pragma unroll
    for (int tok = 0; tok < kSmallMMaxTokens; ++tok) {
      if (tok < m) {
        float v = acc[r][tok];
#pragma unroll
        for (int off = kWarpSize / 2; off > 0; off /= 2) v += shfl_xor(v, off);
        if (lane == 0 && row0 + r < n) {
          store_result(out, out_f32, partial, mn, tok * static_cast<int64_t>(n) + row0 + r, v);
        }
      }
    }
  }
}

// out[i] = sum over splits of partial[s, i], i over [m, n].
__global__ void smallm_reduce_kernel(const float* __restrict__ partial, int splits, int64_t mn,
                                     void* __restrict__ out, bool out_f32) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < mn;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * mn + i];
    store(out, out_f32, i, sum);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool smallm_kernel_available(SmallMKernel kernel) {
#if defined(TESSERA_CUDA)
  (void)kernel;
  return true;
#else
  return kernel == SmallMKernel::kFma;
#endif
}

bool smallm_shape_supported(int64_t m, int64_t n, int64_t k) {
  // int32 indices inside the kernels: k and m * n row offsets stay far below 2^31 for LLM shapes.
  return m >= 1 && m <= kSmallMMaxTokens && n >= 1 && n < (int64_t{1} << 30) && k >= 8 &&
         k % 8 == 0 && k < (int64_t{1} << 30);
}

size_t smallm_workspace_floats(int64_t m, int64_t n, int splits) {
  return splits > 1 ? static_cast<size_t>(splits) * m * n : 0;
}

gpuError_t smallm_linear(SmallMKernel kernel, int splits, const gpu_bf16* x, const gpu_bf16* w,
                         void* out, bool out_f32, int64_t m, int64_t n, int64_t k,
                         float* workspace, gpuStream_t stream) {
  if (!smallm_shape_supported(m, n, k) || !smallm_kernel_available(kernel) || splits < 1 ||
      splits > kMaxSplits || (splits > 1 && workspace == nullptr)) {
    return gpuErrorInvalidValue;
  }
  const int64_t k_per_split = ceil_div(ceil_div(k, splits), kSplitAlign) * kSplitAlign;
  const int32_t mi = static_cast<int32_t>(m), ni = static_cast<int32_t>(n),
                ki = static_cast<int32_t>(k), kps = static_cast<int32_t>(k_per_split);
  switch (kernel) {
#if defined(TESSERA_CUDA)
    case SmallMKernel::kMmaRows16:
      smallm_mma_kernel<1, 4><<<dim3(static_cast<unsigned>(ceil_div(n, 16)), splits), kThreads,
                                0, stream>>>(x, w, out, out_f32, workspace, mi, ni, ki, kps);
      break;
    case SmallMKernel::kMmaRows32:
      smallm_mma_kernel<2, 4><<<dim3(static_cast<unsigned>(ceil_div(n, 32)), splits), kThreads,
                                0, stream>>>(x, w, out, out_f32, workspace, mi, ni, ki, kps);
      break;
    case SmallMKernel::kMmaRows64:
      smallm_mma_kernel<4, 2><<<dim3(static_cast<unsigned>(ceil_div(n, 64)), splits), kThreads,
                                0, stream>>>(x, w, out, out_f32, workspace, mi, ni, ki, kps);
      break;
#endif
    case SmallMKernel::kFma:
      smallm_fma_kernel<<<dim3(static_cast<unsigned>(ceil_div(n, kWarps * kFmaRows)), splits),
                          kThreads, 0, stream>>>(x, w, out, out_f32, workspace, mi, ni, ki, kps);
      break;
    default:
      return gpuErrorInvalidValue;
  }
  if (splits == 1) return gpuGetLastError();
  if (const gpuError_t err = gpuGetLastError(); err != gpuSuccess) return err;
  const int64_t mn = m * n;
  smallm_reduce_kernel<<<static_cast<unsigned>(std::min<int64_t>(ceil_div(mn, kThreads), 1024)),
                         kThreads, 0, stream>>>(workspace, splits, mn, out, out_f32);
  return gpuGetLastError();
}

}  // namespace tessera::gpu
