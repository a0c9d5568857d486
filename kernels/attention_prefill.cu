// Prefill attention, FlashAttention-2 style: one CTA per (128-query tile, query head, prefill
// sequence); 8 warps of 16 query rows each; K/V tiles of 64 keys gathered from the paged cache
// into swizzled shared memory by cp.async (V of tile j loads while S = Q K^T of tile j runs, K
// of tile j+1 while P V of tile j runs); bf16 m16n8k16 tensor-core MMAs with fp32 accumulation;
// online softmax in fp32 registers (exp2 with the scale folded into log2 e). A varlen batch:
// each sequence's new queries sit at query_start[s]..query_start[s+1] in qkv and at positions
// context_len - q_len .. context_len - 1, so chunked prefill attends to the chunks before it.
//
// On sm_90 (H100) a wgmma version of the same algorithm runs instead (see "sm_90a" below).
//
// CUDA only (PTX mma.sync/ldmatrix/cp.async, wgmma). HIP builds answer prefill_kernel_supported()
// with false and run the generic kernel of attention.cu instead: the MFMA version is not written
// yet.
#define TESSERA_GPU_KERNELS_ONLY
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

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


// --- sm_90a: warpgroup MMAs (wgmma) ------------------------------------------------------------
// One CTA per (128-query tile, query head, prefill sequence) as above, but two warpgroups of 64
// query rows each and 128-key tiles. S = Q K^T runs as wgmma m64n64k16 (two per 16 head
// columns: keys 0-63 and 64-127) with both operands read from shared memory (Q and K tiles in
// the 128-byte-swizzled K-major layout that wgmma's descriptors name); P stays in registers
// (fp32 S -> bf16, the mma.m16n8k16 A layout per warp) and O += P V runs as wgmma m64n64k16 per
// 64 columns of the head, V read N-major (transposed) from shared memory. K/V tiles are gathered
// from the paged cache by cp.async into three stages: P V of tile j and S of tile j+1 are queued
// on the tensor cores back to back, tile j+2's copies issued behind them (one barrier per tile);
// the block-table entries of tile j+3 are fetched into registers meanwhile. No wgmma is in
// flight while S is masked or O rescaled (ptxas would serialize the wgmmas otherwise).
namespace hopper {

constexpr int kBlockM = 128;  // queries per CTA: two warpgroups of 64 rows
constexpr int kBlockN = 128;  // keys per tile
constexpr int kThreads = 256;
constexpr int kRegionBytes = 128 * 128;  // 128 rows x 64 bf16 (one 128-byte swizzle column)

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TESSERA_PREFILL_SM90 1

__device__ __forceinline__ void cp16(uint32_t smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(bytes));
}

// Shared-memory matrix descriptor: 128-byte swizzle, 8-row core groups 1024 bytes apart (the
// stride of both the MN and the K direction here: each operand's extent is one swizzle column).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1024 >> 4} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Byte offset of 16-byte chunk c of row r in a 128-row tile: 64-column regions of 128-byte rows,
// chunk index XOR row % 8 (the hardware's 128-byte swizzle; regions are 1024-byte aligned).
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return (c >> 3) * kRegionBytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Waits for all but the most recent cp.async group.
__device__ __forceinline__ void cp_async_wait_one() {
  asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes (cp.async) made visible to the async proxy that wgmma reads through.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Pins a register's value to this point of the program: keeps the compiler from reading a wgmma
// accumulator before the wait, or reusing an A register while a wgmma may still read it.
__device__ __forceinline__ void pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// d[64 x 64] (+)= a[64 x 16] b[16 x 64]^T, both operands K-major in 128-byte-swizzled shared memory.
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                           int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// The same, d = a b^T (d is only written: no instruction before it has to define d).
__device__ __forceinline__ void wgmma_ss_n64_zero(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(0));
}

// d[64 x 64] += a[64 x 16] (registers, the mma.m16n8k16 A layout per warp) b[16 x 64], b N-major
// (transposed) in 128-byte-swizzled shared memory.
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

#endif  // sm_90a

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_kernel(const gpu_bf16* __restrict__ qkv, const gpu_bf16* __restrict__ k_cache,
                   const gpu_bf16* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                   int32_t num_heads, int32_t num_kv_heads, float scale_log2, bool causal,
                   gpu_bf16* __restrict__ out) {
#if defined(TESSERA_PREFILL_SM90)
  constexpr int kChunks = D / 8;                  // 16-byte chunks per row
  constexpr int kRowStep = kThreads / kChunks;    // rows one pass of the CTA copies
  constexpr int kPasses = kBlockN / kRowStep;     // passes per 128-row tile
  constexpr int kTileBytes = 128 * D * 2;
  constexpr int kRegions = D / 64;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = sm80::smem_addr(smem_raw);
  const uint32_t sQ = (raw + 1023) & ~1023u;
  // Stage s: K at sQ + (1 + 2s) tiles, V at sQ + (2 + 2s) tiles.

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
  const int tid = threadIdx.x;
  const int cc = tid % kChunks, r0 = tid / kChunks;  // this thread's chunk column and first row

  const gpu_bf16* q_base =
      qkv + static_cast<int64_t>(q_begin + qt * kBlockM) * qkv_stride + static_cast<int64_t>(h) * D;
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int r = r0 + i * kRowStep;
    const bool ok = r < rows;
    cp16(sQ + sw128(r, cc), ok ? q_base + r * qkv_stride + cc * 8 : q_base, ok ? 16 : 0);
  }
  // Cache slots of this thread's rows of a tile (-1 past n_keys: zero-filled, and masked).
  int slot[kPasses];
  auto fetch_slots = [&](int tile) {
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int j = tile * kBlockN + r0 + i * kRowStep;
      slot[i] = j < n_keys ? table[j / block_size] * block_size + j % block_size : -1;
    }
  };
  const gpu_bf16* k_head = k_cache + static_cast<int64_t>(kvh) * D + cc * 8;
  const gpu_bf16* v_head = v_cache + static_cast<int64_t>(kvh) * D + cc * 8;
  auto load_tile = [&](int stage) {
    const uint32_t sK = sQ + (1 + 2 * stage) * kTileBytes, sV = sK + kTileBytes;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int r = r0 + i * kRowStep;
      const bool ok = slot[i] >= 0;
      const int64_t off = ok ? static_cast<int64_t>(slot[i]) * kv_row : 0;
      cp16(sK + sw128(r, cc), k_head + off, ok ? 16 : 0);
      cp16(sV + sw128(r, cc), v_head + off, ok ? 16 : 0);
    }
  };
  fetch_slots(0);
  load_tile(0);
  sm80::cp_async_commit();
  if (n_tiles > 1) fetch_slots(1);

  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int row0 = qt * kBlockM + wg * 64 + warp * 16 + g;  // this lane's rows: row0, row0 + 8
  const int qpos0 = ctx_start + row0, qpos1 = qpos0 + 8;
  float o[kRegions][32];
#pragma unroll
  for (int b = 0; b < kRegions; ++b) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[b][i] = 0.0f;
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const uint32_t sQ_wg = sQ + wg * 64 * 128;

  if (n_tiles > 1) load_tile(1);
  sm80::cp_async_commit();
  if (n_tiles > 2) fetch_slots(2);
  cp_async_wait_one();
  fence_proxy_async();
  __syncthreads();  // tile 0 and Q landed for every thread
  // S of keys 0-63 and 64-127 of the tile (n8 chunk i: [4i], [4i+1] in row0, [4i+2], [4i+3] in
  // row0 + 8), and P as the A fragments of 16 keys each.
  float sa[32], sb[32];
  uint32_t pa[4][4], pb[4][4];
  auto issue_s = [&](uint32_t sK) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk / 4) * kRegionBytes + (kk % 4) * 32;
      if (kk == 0) {
        wgmma_ss_n64_zero(sa, smem_desc(sQ_wg + koff), smem_desc(sK + koff));
      } else {
        wgmma_ss_n64(sa, smem_desc(sQ_wg + koff), smem_desc(sK + koff), 1);
      }
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk / 4) * kRegionBytes + (kk % 4) * 32;
      if (kk == 0) {
        wgmma_ss_n64_zero(sb, smem_desc(sQ_wg + koff), smem_desc(sK + 64 * 128 + koff));
      } else {
        wgmma_ss_n64(sb, smem_desc(sQ_wg + koff), smem_desc(sK + 64 * 128 + koff), 1);
      }
    }
    wgmma_commit();
  };
  auto rescale = [&](float alpha0, float alpha1) {
#pragma unroll
    for (int b = 0; b < kRegions; ++b) {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        o[b][4 * i] *= alpha0;
        o[b][4 * i + 1] *= alpha0;
        o[b][4 * i + 2] *= alpha1;
        o[b][4 * i + 3] *= alpha1;
      }
    }
  };
  auto pin_o = [&] {
#pragma unroll
    for (int b = 0; b < kRegions; ++b) {
#pragma unroll
      for (int i = 0; i < 32; ++i) pin(o[b][i]);
    }
  };
  auto pin_p = [&](uint32_t (&pf)[4][4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) pin(pf[kk][i]);
    }
  };
  // Softmax of the whole tile (both halves) from one running max.
  auto softmax_full = [&](float& alpha0, float& alpha1, int key_base) {
    float* hs[2] = {sa, sb};
    if (key_base + kBlockN > n_keys || (causal && key_base + kBlockN - 1 > first_pos)) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key_base + hf * 64 + n * 8 + 2 * t + e;
            if (key >= ctx || (causal && key > qpos0)) hs[hf][4 * n + e] = -INFINITY;
            if (key >= ctx || (causal && key > qpos1)) hs[hf][4 * n + 2 + e] = -INFINITY;
          }
        }
      }
    }
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        mx0 = fmaxf(mx0, fmaxf(hs[hf][4 * n], hs[hf][4 * n + 1]));
        mx1 = fmaxf(mx1, fmaxf(hs[hf][4 * n + 2], hs[hf][4 * n + 3]));
      }
    }
    mx0 = fmaxf(mx0, shfl_xor(mx0, 1));
    mx0 = fmaxf(mx0, shfl_xor(mx0, 2));
    mx1 = fmaxf(mx1, shfl_xor(mx1, 1));
    mx1 = fmaxf(mx1, shfl_xor(mx1, 2));
    const float base0 = mx0 == -INFINITY ? 0.0f : mx0 * scale_log2;
    const float base1 = mx1 == -INFINITY ? 0.0f : mx1 * scale_log2;
    alpha0 = exp2_approx(m0 * scale_log2 - base0);
    alpha1 = exp2_approx(m1 * scale_log2 - base1);
    m0 = mx0;
    m1 = mx1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      uint32_t (&pf)[4][4] = hf == 0 ? pa : pb;
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const float e0 = exp2_approx(hs[hf][4 * n] * scale_log2 - base0);
        const float e1 = exp2_approx(hs[hf][4 * n + 1] * scale_log2 - base0);
        const float e2 = exp2_approx(hs[hf][4 * n + 2] * scale_log2 - base1);
        const float e3 = exp2_approx(hs[hf][4 * n + 3] * scale_log2 - base1);
        sum0 += e0 + e1;
        sum1 += e2 + e3;
        pf[n / 2][(n % 2) * 2] = pack_bf16x2(e0, e1);
        pf[n / 2][(n % 2) * 2 + 1] = pack_bf16x2(e2, e3);
      }
    }
    l0 = l0 * alpha0 + sum0;
    l1 = l1 * alpha1 + sum1;
  };
  // Nothing is in flight while S is masked or O rescaled; P V of tile j and S of tile j+1 are
  // queued back to back (one wait), the copies of tile j+2 issued behind them.
  issue_s(sQ + kTileBytes);
  wgmma_wait<0>();
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int stage = tile % 3;
    const uint32_t sV = sQ + (2 + 2 * stage) * kTileBytes;
    float alpha0, alpha1;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      pin(sa[i]);
      pin(sb[i]);
    }
    pin_o();
    pin_p(pa);
    pin_p(pb);
    softmax_full(alpha0, alpha1, tile * kBlockN);
    rescale(alpha0, alpha1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
#pragma unroll
      for (int b = 0; b < kRegions; ++b) {
        wgmma_rs_n64_tb(o[b], kk < 4 ? pa[kk] : pb[kk - 4],
                        smem_desc(sV + b * kRegionBytes + kk * 16 * 128));
      }
    }
    wgmma_commit();
    if (tile + 1 < n_tiles) {
      sm80::cp_async_wait_all();
      fence_proxy_async();
      __syncthreads();  // tile + 1 landed for every thread; every warpgroup is done with tile - 1
      issue_s(sQ + (1 + 2 * ((tile + 1) % 3)) * kTileBytes);
      if (tile + 2 < n_tiles) {
        load_tile((tile + 2) % 3);
        sm80::cp_async_commit();
        if (tile + 3 < n_tiles) fetch_slots(tile + 3);
      }
    }
    wgmma_wait<0>();
  }
  pin_o();
  pin_p(pa);
  pin_p(pb);
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
  for (int b = 0; b < kRegions; ++b) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int col = b * 64 + i * 8;
      if (write0) {
        *reinterpret_cast<uint32_t*>(o0 + col) = pack_bf16x2(o[b][4 * i] * inv0, o[b][4 * i + 1] * inv0);
      }
      if (write1) {
        *reinterpret_cast<uint32_t*>(o1 + col) =
            pack_bf16x2(o[b][4 * i + 2] * inv1, o[b][4 * i + 3] * inv1);
      }
    }
  }
#endif  // TESSERA_PREFILL_SM90
}

template <int D>
constexpr int smem_bytes() {  // Q, 3 stages of K and V, alignment
  return 7 * kBlockM * D * static_cast<int>(sizeof(gpu_bf16)) + 1024;
}

}  // namespace hopper

template <int D>
gpuError_t launch_prefill(const gpu_bf16* qkv, const gpu_bf16* k_cache, const gpu_bf16* v_cache,
                          int32_t block_size, const DeviceStep& step, int32_t num_heads,
                          int32_t num_kv_heads, float scale, bool causal, gpu_bf16* out,
                          gpuStream_t stream) {
  // Once per device (d < 64): which kernel runs there (the wgmma one on sm_90, whose sm_90a
  // machine code this file carries; TESSERA_PREFILL_KERNEL=mma picks the mma.sync one anyway, for
  // comparisons), and its more than 48 KiB of dynamic shared memory allowed. 0: not decided yet.
  enum : uint8_t { kUndecided, kMma, kWgmma };
  static std::atomic<uint8_t> chosen[64];
  int device = 0;
  gpuError_t err = cudaGetDevice(&device);
  if (err != gpuSuccess) return err;
  uint8_t kind = device < 64 ? chosen[device].load(std::memory_order_acquire) : kUndecided;
  if (kind == kUndecided) {
    int major = 0, minor = 0;
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (err != gpuSuccess) return err;
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (err != gpuSuccess) return err;
    const char* force = std::getenv("TESSERA_PREFILL_KERNEL");
    const bool mma = force != nullptr && std::string_view(force) == "mma";
    kind = major == 9 && minor == 0 && !mma ? kWgmma : kMma;
    if (kind == kWgmma) {
      err = cudaFuncSetAttribute(hopper::prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 hopper::smem_bytes<D>());
    } else {
      err = cudaFuncSetAttribute(prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (kBlockM + 2 * kBlockN) * D * static_cast<int>(sizeof(gpu_bf16)));
    }
    if (err != gpuSuccess) return err;
    if (device < 64) chosen[device].store(kind, std::memory_order_release);
  }
  const float scale_log2 = scale * 1.4426950408889634f;
  if (kind == kWgmma) {
    const dim3 grid((step.max_prefill_q + hopper::kBlockM - 1) / hopper::kBlockM, num_heads,
                    step.num_prefill_seqs);
    hopper::prefill_kernel<D><<<grid, hopper::kThreads, hopper::smem_bytes<D>(), stream>>>(
        qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads, scale_log2, causal, out);
  } else {
    const int smem = (kBlockM + 2 * kBlockN) * D * static_cast<int>(sizeof(gpu_bf16));
    const dim3 grid((step.max_prefill_q + kBlockM - 1) / kBlockM, num_heads, step.num_prefill_seqs);
    prefill_kernel<D><<<grid, kThreads, smem, stream>>>(qkv, k_cache, v_cache, block_size, step,
                                                         num_heads, num_kv_heads, scale_log2,
                                                         causal, out);
  }
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
