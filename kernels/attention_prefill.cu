// Prefill attention, FlashAttention-2 style: one CTA per (128-query tile, query head, prefill
// sequence); 8 warps of 16 query rows each (d = 256: 64-query tiles, 4 warps, Q's fragments
// reloaded from shared memory per key tile); K/V tiles of 64 keys gathered from the paged cache
// into swizzled shared memory by cp.async (V of tile j loads while S = Q K^T of tile j runs, K
// of tile j+1 while P V of tile j runs); m16n8k16 tensor-core MMAs of the element type (bf16 or
// fp16) with fp32 accumulation;
// online softmax in fp32 registers (exp2 with the scale folded into log2 e); Gemma 2's logit
// soft-cap on the scores before it, and sliding windows (a query at p sees keys in (p - window,
// p]: the key tiles wholly before a query tile's window are never loaded). A varlen batch:
// each sequence's new queries sit at query_start[s]..query_start[s+1] in qkv and at positions
// context_len - q_len .. context_len - 1, so chunked prefill attends to the chunks before it.
//
// On sm_90 (H100) wgmma versions of the same algorithm run instead (see "sm_90a" below):
// prefill_kernel at d = 64 and 128, prefill_kernel_d256 at d = 256 (this kernel ran d = 256 at
// 0.36-0.39x of FlashAttention-2 on an H100; the wgmma one at 1.09-1.47x: docs/perf.md). This
// kernel and the wgmma one's paired form (short causal prefills) are launched overlapping the
// kernel before them (launch.h: programmatic dependent launch on sm_90), which in a model step is
// RoPE + cache write.
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

#include "kernels/attention_math.h"
#include "kernels/gpu_ops.h"
#include "kernels/launch.h"
#include "kernels/mma_sm80.h"

namespace tessera::gpu {

#if defined(TESSERA_CUDA)

namespace {

constexpr int kBlockN = 64;  // keys per tile
// Queries per CTA of the mma.sync kernel: 128 (8 warps) up to d = 128 (64 with 4 warps measured
// 25% slower on H100 at d = 128); at d = 256, 64 (4 warps): a thread's 128 fp32 accumulators
// leave no registers for Q's fragments, and 96 KiB of tiles let two CTAs share a multiprocessor.
template <int D>
constexpr int kMmaBlockM = D > 128 ? 64 : 128;
template <int D>
constexpr int kMmaThreads = kMmaBlockM<D> / 16 * 32;
template <int D>
constexpr int kMmaSmemBytes = (kMmaBlockM<D> + 2 * kBlockN) * D * 2;  // Q, K, V tiles


// A query tile of a prefill sequence and the keys it attends to. blockIdx is (which query tile,
// query head, prefill sequence); `init` reads the sequence, `set_tile` picks the tile.
template <int D, int BlockM, int BlockN>
struct PrefillTile {
  // Key tiles k_tile0 .. k_tile0 + n_tiles - 1 hold the tile's keys (k_tile0 > 0: a sliding window
  // starts past the first tiles).
  int seq, h, qt, q_begin, q_len, ctx, ctx_start, kvh, rows, first_pos, n_keys, k_tile0, n_tiles;
  int64_t qkv_stride, kv_row;
  const int32_t* table;  // the sequence's block table

  __device__ __forceinline__ void init(const DeviceStep& step, int32_t num_heads,
                                       int32_t num_kv_heads) {
    seq = step.prefill_seqs[blockIdx.z];
    h = blockIdx.y;
    q_begin = step.query_start[seq];
    q_len = step.query_start[seq + 1] - q_begin;
    ctx = step.context_len[seq];
    ctx_start = ctx - q_len;
    kvh = h / (num_heads / num_kv_heads);
    qkv_stride = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * D;
    kv_row = static_cast<int64_t>(num_kv_heads) * D;
    table = step.block_tables + static_cast<int64_t>(seq) * step.max_blocks;
  }
  // Keys query tile `tile` attends to: causal attention stops at the tile's last query.
  __device__ __forceinline__ int keys_of(int tile, bool causal) const {
    return causal ? min(ctx, ctx_start + (tile + 1) * BlockM) : ctx;
  }
  // False when the tile starts past the sequence's new queries (nothing to do). With a window,
  // the key tiles before the first key of the tile's first query's window are skipped.
  __device__ __forceinline__ bool set_tile(int tile, bool causal, int window = 0) {
    qt = tile;
    if (qt * BlockM >= q_len) return false;
    rows = min(BlockM, q_len - qt * BlockM);
    first_pos = ctx_start + qt * BlockM;
    n_keys = keys_of(qt, causal);
    k_tile0 = window_first_key(first_pos, window) / BlockN;
    n_tiles = (n_keys + BlockN - 1) / BlockN - k_tile0;
    return true;
  }
};

// Masks a key tile's scores where it crosses the causal diagonal or the end of the keys. The
// lane's scores come in Chunks n8 chunks (m16n8 accumulator fragments): s[4n + e] in its first
// row, s[4n + 2 + e] in its second, eight rows down, for key first_key + 8n + e (first_key: the
// tile's first key plus 2 x the lane's column pair). A key past the last one its row may see
// (last0, last1: min(the row's position, context - 1) when causal, context - 1 otherwise) scores
// -inf. 8n + e is a constant, so a score costs one compare and one select; written as
// `key >= ctx || key > qpos`, the tests compiled to a divergent branch per score (~570
// instructions for a masked tile of the wgmma kernel).
template <int Chunks>
__device__ __forceinline__ void mask_scores(float* s, int first_key, int last0, int last1) {
  const int limit0 = last0 - first_key, limit1 = last1 - first_key;
#pragma unroll
  for (int n = 0; n < Chunks; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      s[4 * n + e] = 8 * n + e > limit0 ? -INFINITY : s[4 * n + e];
      s[4 * n + 2 + e] = 8 * n + e > limit1 ? -INFINITY : s[4 * n + 2 + e];
    }
  }
}

// mask_scores with a sliding window as well: keys before first0 / first1 (the rows' first keys in
// the window) score -inf too.
template <int Chunks>
__device__ __forceinline__ void mask_scores_window(float* s, int first_key, int first0, int last0,
                                                   int first1, int last1) {
  const int lo0 = first0 - first_key, hi0 = last0 - first_key;
  const int lo1 = first1 - first_key, hi1 = last1 - first_key;
#pragma unroll
  for (int n = 0; n < Chunks; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int k = 8 * n + e;
      s[4 * n + e] = k > hi0 || k < lo0 ? -INFINITY : s[4 * n + e];
      s[4 * n + 2 + e] = k > hi1 || k < lo1 ? -INFINITY : s[4 * n + 2 + e];
    }
  }
}

// Soft-caps a tile's scores in place (Count of them).
template <int Count>
__device__ __forceinline__ void soft_cap_scores(float* s, const SoftCapArgs& cap) {
#pragma unroll
  for (int i = 0; i < Count; ++i) s[i] = soft_cap_score(s[i], cap);
}

// Adds the quad's four partial sums into l0 and l1 (the two query rows a thread's m16n8
// accumulator fragments hold) and returns their inverses, 0 for a row that saw no key.
__device__ __forceinline__ float2 reduce_row_sums(float& l0, float& l1) {
  l0 += shfl_xor(l0, 1);
  l0 += shfl_xor(l0, 2);
  l1 += shfl_xor(l1, 1);
  l1 += shfl_xor(l1, 2);
  return make_float2(l0 > 0.0f ? 1.0f / l0 : 0.0f, l1 > 0.0f ? 1.0f / l1 : 0.0f);
}

template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads<D>)
    prefill_kernel(const T* __restrict__ qkv, const T* __restrict__ k_cache,
                   const T* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                   int32_t num_heads, int32_t num_kv_heads, float scale_log2, bool causal,
                   SoftCapArgs cap, int32_t window, T* __restrict__ out) {
  constexpr int kBlockM = kMmaBlockM<D>;
  constexpr int kThreads = kMmaThreads<D>;
  constexpr bool kQInRegisters = D <= 128;
  // S's loop over d: unrolled whole when Q's fragments are registers (indexed by constants); at
  // d = 256 by 4 (unrolled whole, ptxas hoisted the shared-memory loads of every step ahead and
  // spilled 228 bytes; by 4: 242 registers, no spills).
  constexpr int kSUnroll = kQInRegisters ? D / 16 : 4;
  constexpr int kChunks = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + kBlockM * D;
  T* sV = sK + kBlockN * D;

  // The longest (last) query tiles start first.
  PrefillTile<D, kBlockM, kBlockN> tp;
  tp.init(step, num_heads, num_kv_heads);
  // Launched overlapping the previous kernel (launch.h), which may still be writing q and the
  // cache. A CTA without a tile waits too before it exits: the grid must not end before its
  // predecessor has, or the next kernel's wait would not cover the predecessor's writes.
  if (!tp.set_tile(gridDim.x - 1 - blockIdx.x, causal, window)) {
    wait_for_prior_kernels();
    return;
  }
  wait_for_prior_kernels();
  let_next_kernel_start();
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

  const T* q_base =
      qkv + static_cast<int64_t>(tp.q_begin + tp.qt * kBlockM) * tp.qkv_stride +
      static_cast<int64_t>(tp.h) * D;
  for (int i = tid; i < kBlockM * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = r < tp.rows;
    sm80::cp_async_16(sQ + sm80::swz<D>(r, c), ok ? q_base + r * tp.qkv_stride + c * 8 : q_base,
                      ok ? 16 : 0);
  }
  // Keys past n_keys are zero-filled: their scores are masked, and zeros keep P V finite.
  auto load_tile = [&](T* dst, const T* cache, int tile) {
    for (int i = tid; i < kBlockN * kChunks; i += kThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const int j = tile * kBlockN + r;
      const T* src = cache;
      if (j < tp.n_keys) {
        const int64_t slot =
            static_cast<int64_t>(tp.table[j / block_size]) * block_size + j % block_size;
        src = cache + slot * tp.kv_row + static_cast<int64_t>(tp.kvh) * D + c * 8;
      }
      sm80::cp_async_16(dst + sm80::swz<D>(r, c), src, j < tp.n_keys ? 16 : 0);
    }
  };
  load_tile(sK, k_cache, tp.k_tile0);
  sm80::cp_async_commit();
  sm80::cp_async_wait_all();
  __syncthreads();

  const int mi = lane / 8;  // which of ldmatrix's four matrices this lane addresses
  // Q's A fragments: in registers up to d = 128, else loaded per use (kk) from shared memory.
  auto q_fragment = [&](uint32_t (&f)[4], int kk) {
    sm80::ldmatrix_x4(f, sQ + sm80::swz<D>(warp * 16 + (mi % 2) * 8 + lane % 8, kk * 2 + mi / 2));
  };
  uint32_t qf[kQInRegisters ? D / 16 : 1][4];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) q_fragment(qf[kk], kk);
  }

  const int g = lane / 4, t = lane % 4;
  const int row0 = tp.qt * kBlockM + warp * 16 + g;  // this lane's two rows: row0 and row0 + 8
  const int qpos0 = tp.ctx_start + row0;  // row0's position; row0 + 8's is 8 more
  // The last keys the two rows see (mask_scores).
  const int last0 = causal ? min(qpos0, tp.ctx - 1) : tp.ctx - 1;
  const int last1 = causal ? min(qpos0 + 8, tp.ctx - 1) : tp.ctx - 1;
  // The first keys they see (0 without a window).
  const int first0 = window_first_key(qpos0, window), first1 = window_first_key(qpos0 + 8, window);
  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int tile = tp.k_tile0; tile < tp.k_tile0 + tp.n_tiles; ++tile) {
    load_tile(sV, v_cache, tile);
    sm80::cp_async_commit();

    float s[kBlockN / 8][4];
#pragma unroll
    for (int n = 0; n < kBlockN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll(kSUnroll)
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[4];
      if constexpr (kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = qf[kk][i];
      } else {
        q_fragment(a, kk);
      }
#pragma unroll
      for (int np = 0; np < kBlockN / 16; ++np) {
        uint32_t b[4];
        sm80::ldmatrix_x4(b, sK + sm80::swz<D>(np * 16 + (mi / 2) * 8 + lane % 8, kk * 2 + mi % 2));
        sm80::mma_16816<T>(s[2 * np], a, b[0], b[1]);
        sm80::mma_16816<T>(s[2 * np + 1], a, b[2], b[3]);
      }
    }

    if (cap.on) soft_cap_scores<kBlockN / 2>(&s[0][0], cap);
    const int key_base = tile * kBlockN;
    if (key_base + kBlockN > tp.n_keys || (causal && key_base + kBlockN - 1 > tp.first_pos) ||
        (window > 0 && key_base < tp.first_pos + kBlockM - window)) {
      mask_scores_window<kBlockN / 8>(&s[0][0], key_base + 2 * t, first0, last0, first1, last1);
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
    if (tile + 1 < tp.k_tile0 + tp.n_tiles) {
      load_tile(sK, k_cache, tile + 1);
      sm80::cp_async_commit();
    }

#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t a[4] = {Element<T>::pack(s[2 * kk][0], s[2 * kk][1]),
                             Element<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                             Element<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             Element<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        sm80::ldmatrix_x4_trans(
            b, sV + sm80::swz<D>(kk * 16 + (mi % 2) * 8 + lane % 8, dp * 2 + mi / 2));
        sm80::mma_16816<T>(o[2 * dp], a, b[0], b[1]);
        sm80::mma_16816<T>(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
    sm80::cp_async_wait_all();
    __syncthreads();  // K of the next tile landed; every warp is done reading V
  }

  const float2 inv = reduce_row_sums(l0, l1);
  const float inv0 = inv.x, inv1 = inv.y;
  const int64_t out_stride = static_cast<int64_t>(num_heads) * D;
  T* o0 = out + (tp.q_begin + row0) * out_stride + static_cast<int64_t>(tp.h) * D + 2 * t;
  T* o1 = o0 + 8 * out_stride;
  const bool write0 = row0 < tp.q_len, write1 = row0 + 8 < tp.q_len;
#pragma unroll
  for (int d = 0; d < D / 8; ++d) {
    if (write0) {
      *reinterpret_cast<uint32_t*>(o0 + d * 8) = Element<T>::pack(o[d][0] * inv0, o[d][1] * inv0);
    }
    if (write1) {
      *reinterpret_cast<uint32_t*>(o1 + d * 8) = Element<T>::pack(o[d][2] * inv1, o[d][3] * inv1);
    }
  }
}


// --- sm_90a: warpgroup MMAs (wgmma) ------------------------------------------------------------
// One CTA per (128-query tile, query head, prefill sequence) as above, but two warpgroups of 64
// query rows each and 128-key tiles. S = Q K^T runs as wgmma m64n128k16 with both operands read
// from shared memory (Q and K tiles in the 128-byte-swizzled K-major layout that wgmma's
// descriptors name); P stays in registers (fp32 S -> T, the mma.m16n8k16 A layout per warp)
// and O += P V runs as wgmma m64n128k16 (d=64: m64n64k16), V read N-major (transposed) from shared
// memory. K/V tiles are gathered from the paged cache by cp.async into three stages, each with
// mbarriers instead of CTA-wide barriers: `full` completes when every thread's copies landed
// (cp.async.mbarrier.arrive), `k_free` / `v_free` when every warp's wgmmas reading the stage's
// K / V retired. The two warpgroups take turns on the tensor cores (ping-pong, named barriers):
// one turn queues a warpgroup's P V of tile j and S of tile j+1, and its softmax of tile j+1 runs
// while the other warpgroup's turn runs. Copies of tile j+2 are issued right behind a turn, and
// block-table lookups use a multiply-shift division (a hardware divide per key row made the
// kernel issue-bound). No wgmma is in flight while S is masked or O rescaled (ptxas would
// serialize the wgmmas otherwise).
// Paired (short causal prefills): a CTA takes two query tiles of its (head, sequence), n - 1 - p
// and p, as one stream of key tiles: the pairs cost alike (the grid has no long tail of the last
// query tiles), and the second tile's block-table reads, K/V copies and first S run behind the
// first tile's last ones instead of in a fresh CTA's start (a CTA's fixed cost, fitted from the
// non-causal rates at 1k and 16k queries, is about 2.5 key tiles' time: a third of a CTA at 1024
// causal queries, whose tiles average 4.5 key tiles).
namespace hopper {

constexpr int kBlockM = 128;  // queries per CTA: two warpgroups of 64 rows
constexpr int kThreads = 256;

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TESSERA_PREFILL_SM90 1
constexpr int kBlockN = 128;  // keys per tile
constexpr int kRegionBytes = 128 * 128;  // 128 rows x 64 elements (one 128-byte swizzle column)

__device__ __forceinline__ void cp16(uint32_t smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(bytes));
}

// Shared-memory matrix descriptor: 128-byte swizzle, 8-row core groups 1024 bytes apart (K-major
// operands: Q and K tiles; and V for d=64, whose extent is one swizzle column).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1024 >> 4} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Byte offset of 16-byte chunk c of row r in a 128-row tile: 64-column regions of 128-byte rows,
// chunk index XOR row % 8 (the hardware's 128-byte swizzle; regions are 1024-byte aligned).
__device__ __forceinline__ uint32_t sw128(int r, int c) {
  return (c >> 3) * kRegionBytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
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

// d[64 x 64] += a[64 x 16] (registers, the mma.m16n8k16 A layout per warp) b[16 x 64], b N-major
// (transposed) in 128-byte-swizzled shared memory.
// The wgmma accumulator O of a thread's two query rows, in Regions column regions of 64 (row 0:
// o[b][4i], o[b][4i + 1]; row 1: o[b][4i + 2], o[b][4i + 3]; columns b * 64 + i * 8 + 2t, + 1):
// rescaled by the online softmax's alphas, and stored normalized (rows past the query tile's end
// not written).
template <int Regions>
__device__ __forceinline__ void rescale_rows(float (&o)[Regions][32], float alpha0, float alpha1) {
#pragma unroll
  for (int b = 0; b < Regions; ++b) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      o[b][4 * i] *= alpha0;
      o[b][4 * i + 1] *= alpha0;
      o[b][4 * i + 2] *= alpha1;
      o[b][4 * i + 3] *= alpha1;
    }
  }
}
template <typename T, int Regions>
__device__ __forceinline__ void store_rows(const float (&o)[Regions][32], float inv0, float inv1,
                                           T* row0, T* row1, bool write0, bool write1) {
#pragma unroll
  for (int b = 0; b < Regions; ++b) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int col = b * 64 + i * 8;
      if (write0) {
        *reinterpret_cast<uint32_t*>(row0 + col) =
            Element<T>::pack(o[b][4 * i] * inv0, o[b][4 * i + 1] * inv0);
      }
      if (write1) {
        *reinterpret_cast<uint32_t*>(row1 + col) =
            Element<T>::pack(o[b][4 * i + 2] * inv1, o[b][4 * i + 3] * inv1);
      }
    }
  }
}
// Keeps O, S and P in registers across the ping-pong's turns (see pin()).
template <int Regions, int SCount, int PRows>
__device__ __forceinline__ void pin_registers(float (&o)[Regions][32], float (&s)[SCount],
                                              uint32_t (&p)[PRows][4]) {
#pragma unroll
  for (int b = 0; b < Regions; ++b) {
#pragma unroll
    for (int i = 0; i < 32; ++i) pin(o[b][i]);
  }
#pragma unroll
  for (int i = 0; i < SCount; ++i) pin(s[i]);
#pragma unroll
  for (int kk = 0; kk < PRows; ++kk) {
#pragma unroll
    for (int i = 0; i < 4; ++i) pin(p[kk][i]);
  }
}

// One key tile's online-softmax step in the wgmma accumulator layout, for the two query rows a
// thread holds (s[4c], s[4c + 1] of row 0 and s[4c + 2], s[4c + 3] of row 1, for Chunks chunks of 8
// keys): the rows' running max and sum move on, the tile's probabilities go to `p` (the PV
// product's A operand, pairs of T), and alpha0/1 are what O must be rescaled by.
template <typename T, int Chunks>
__device__ __forceinline__ void online_softmax_tile(const float* s, float scale_log2, float& m0,
                                                    float& m1, float& l0, float& l1, float& alpha0,
                                                    float& alpha1, uint32_t (*p)[4]) {
  float mx0 = m0, mx1 = m1;
#pragma unroll
  for (int c = 0; c < Chunks; ++c) {
    mx0 = fmaxf(mx0, fmaxf(s[4 * c], s[4 * c + 1]));
    mx1 = fmaxf(mx1, fmaxf(s[4 * c + 2], s[4 * c + 3]));
  }
  mx0 = fmaxf(mx0, shfl_xor(mx0, 1));
  mx0 = fmaxf(mx0, shfl_xor(mx0, 2));
  mx1 = fmaxf(mx1, shfl_xor(mx1, 1));
  mx1 = fmaxf(mx1, shfl_xor(mx1, 2));
  // A row with every key so far masked keeps max -inf: subtract 0 instead (no inf - inf).
  const float base0 = mx0 == -INFINITY ? 0.0f : mx0 * scale_log2;
  const float base1 = mx1 == -INFINITY ? 0.0f : mx1 * scale_log2;
  alpha0 = exp2_approx(m0 * scale_log2 - base0);
  alpha1 = exp2_approx(m1 * scale_log2 - base1);
  m0 = mx0;
  m1 = mx1;
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int c = 0; c < Chunks; ++c) {
    const float e0 = exp2_approx(s[4 * c] * scale_log2 - base0);
    const float e1 = exp2_approx(s[4 * c + 1] * scale_log2 - base0);
    const float e2 = exp2_approx(s[4 * c + 2] * scale_log2 - base1);
    const float e3 = exp2_approx(s[4 * c + 3] * scale_log2 - base1);
    sum0 += e0 + e1;
    sum1 += e2 + e3;
    p[c / 2][(c % 2) * 2] = Element<T>::pack(e0, e1);
    p[c / 2][(c % 2) * 2 + 1] = Element<T>::pack(e2, e3);
  }
  l0 = l0 * alpha0 + sum0;
  l1 = l1 * alpha1 + sum1;
}

template <typename T>
__device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n",
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// mbarriers in shared memory (CTA scope).
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// Arrives on bar once every cp.async this thread issued so far has landed (counted in the
// barrier's expected arrivals: noinc).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase of the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// Named barriers (0 is __syncthreads'): sync waits for `count` threads, arrive only counts.
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// d[64 x 128] (+)= a[64 x 16] b[16 x 128]^T, both operands K-major in 128-byte-swizzled shared
// memory (n8 chunk i of d: [4i], [4i+1] in the lane's first row, [4i+2], [4i+3] eight rows down).
template <typename T>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n",
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// The same, d = a b^T (d is only written: no instruction before it has to define d).
template <typename T>
__device__ __forceinline__ void wgmma_ss_n128_zero(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n",
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31]), "=f"(d[32]), "=f"(d[33]), "=f"(d[34]), "=f"(d[35]), "=f"(d[36]), "=f"(d[37]), "=f"(d[38]), "=f"(d[39]), "=f"(d[40]), "=f"(d[41]), "=f"(d[42]), "=f"(d[43]), "=f"(d[44]), "=f"(d[45]), "=f"(d[46]), "=f"(d[47]), "=f"(d[48]), "=f"(d[49]), "=f"(d[50]), "=f"(d[51]), "=f"(d[52]), "=f"(d[53]), "=f"(d[54]), "=f"(d[55]), "=f"(d[56]), "=f"(d[57]), "=f"(d[58]), "=f"(d[59]), "=f"(d[60]), "=f"(d[61]), "=f"(d[62]), "=f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(0));
}

// d[64 x 128] += a[64 x 16] (registers) b[16 x 128], b N-major in two 64-column swizzle atoms
// kRegionBytes apart (the descriptor's leading byte offset); d0 holds columns 0-63, d1 64-127.
template <typename T>
__device__ __forceinline__ void wgmma_rs_n128_tb(float (&d0)[32], float (&d1)[32], const uint32_t (&a)[4],
                                                 uint64_t desc_b) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n",
      : "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]), "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]), "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]), "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]), "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]), "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]), "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]), "+f"(d1[16]), "+f"(d1[17]), "+f"(d1[18]), "+f"(d1[19]), "+f"(d1[20]), "+f"(d1[21]), "+f"(d1[22]), "+f"(d1[23]), "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]), "+f"(d1[27]), "+f"(d1[28]), "+f"(d1[29]), "+f"(d1[30]), "+f"(d1[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// Descriptor of an N-major operand spanning two 64-column swizzle atoms (V for d=128): leading
// byte offset kRegionBytes between the atoms, 8-row core groups 1024 bytes apart.
__device__ __forceinline__ uint64_t smem_desc_mn(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{kRegionBytes >> 4} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// --- d = 256 (prefill_kernel_d256 below): 64-row K and V tiles ---
constexpr int kD256RegionBytes = 64 * 128;  // 64 rows x 64 elements (one swizzle column)

// Byte offset of 16-byte chunk c of row r in a 64-row tile (sw128's layout, 64-row regions).
__device__ __forceinline__ uint32_t sw128_64(int r, int c) {
  return (c >> 3) * kD256RegionBytes + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

// Descriptor of an N-major operand of 64-row tiles whose N spans several 64-column swizzle atoms
// (V for d=256): leading byte offset kD256RegionBytes between the atoms.
__device__ __forceinline__ uint64_t smem_desc_mn64(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{kD256RegionBytes >> 4} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// d[64 x 64] (+)= a[64 x 16] b[16 x 64]^T, both operands K-major in 128-byte-swizzled shared
// memory (the accumulator layout of wgmma_ss_n128, 8 n8 chunks).
template <typename T>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n",
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// The same, d = a b^T (d only written).
template <typename T>
__device__ __forceinline__ void wgmma_ss_n64_zero(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  TESSERA_TYPED_MMA_ASM(T,
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.",
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n",
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(0));
}

#endif  // sm_90a

// Ext: the soft-capped and windowed instantiation (never paired): scores capped (cap.on) before
// the mask, which also hides keys before each row's window; key tiles wholly before the query
// tile's first window are skipped. The plain instantiations ignore cap and window.
template <typename T, int D, bool Paired, bool Ext>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_kernel(const T* __restrict__ qkv, const T* __restrict__ k_cache,
                   const T* __restrict__ v_cache, int32_t block_size, uint32_t bs_magic,
                   int32_t bs_shift, DeviceStep step, int32_t num_heads, int32_t num_kv_heads,
                   float scale_log2, bool causal, SoftCapArgs cap, int32_t window,
                   T* __restrict__ out) {
  static_assert(!(Paired && Ext), "soft-capped and windowed prefills run unpaired");
#if defined(TESSERA_PREFILL_SM90)
  constexpr int kChunks = D / 8;                  // 16-byte chunks per row
  constexpr int kRowStep = kThreads / kChunks;    // rows one pass of the CTA copies
  constexpr int kPasses = kBlockN / kRowStep;     // passes per 128-row tile
  constexpr int kQRowStep = 128 / kChunks;        // rows one pass of a warpgroup copies
  constexpr int kQPasses = 64 / kQRowStep;        // passes per warpgroup's 64 query rows
  constexpr int kTileBytes = 128 * D * 2;
  constexpr int kRegions = D / 64;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // Per stage: full (every thread's copies of the tile landed), k_free and v_free (every warp's
  // wgmmas reading the stage's K, V retired); per warpgroup: q_full (its rows of the second query
  // tile landed).
  __shared__ __align__(8) uint64_t bars[11];
  const uint32_t raw = sm80::smem_addr(smem_raw);
  const uint32_t sQ = (raw + 1023) & ~1023u;
  const uint32_t full = sm80::smem_addr(bars), k_free = full + 24, v_free = full + 48,
                 q_full = full + 72;
  // Stage s: K at sQ + (1 + 2s) tiles, V at sQ + (2 + 2s) tiles.

  // The CTA's work, in one (query head, sequence): paired, query tiles n_qt - 1 - p and p,
  // p = blockIdx.x (one tile where the two meet); else query tile gridDim.x - 1 - blockIdx.x
  // (the longest tiles start first).
  PrefillTile<D, kBlockM, kBlockN> tp;
  tp.init(step, num_heads, num_kv_heads);
  const int n_qt = (tp.q_len + kBlockM - 1) / kBlockM;
  const int qt_first = Paired ? n_qt - 1 - static_cast<int>(blockIdx.x)
                              : static_cast<int>(gridDim.x - 1 - blockIdx.x);
  const int qt_second = Paired ? static_cast<int>(blockIdx.x) : qt_first;
  if (qt_first < qt_second || qt_first >= n_qt) {
    // No tile: wait before exiting all the same (the paired kernel is launched overlapping; see
    // launch.h -- the grid must not end before its predecessor has).
    if constexpr (Paired) wait_for_prior_kernels();
    return;
  }
  tp.set_tile(qt_first, causal, Ext ? window : 0);
  // Key tiles of the CTA's stream: the first query tile's (from key tile k0_first), then the
  // second's (none when the two coincide).
  const int n_first = tp.n_tiles, keys_first = tp.n_keys, k0_first = tp.k_tile0;
  const int keys_second = tp.keys_of(qt_second, causal);
  const int n_total =
      n_first + (Paired && qt_second < qt_first ? (keys_second + kBlockN - 1) / kBlockN : 0);
  const int tid = threadIdx.x;
  const int cc = tid % kChunks, r0 = tid / kChunks;  // this thread's chunk column and first row
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 3; ++s) {
      mbar_init(full + 8 * s, kThreads);
      mbar_init(k_free + 8 * s, kThreads / 32);
      mbar_init(v_free + 8 * s, kThreads / 32);
    }
    mbar_init(q_full, 128);
    mbar_init(q_full + 8, 128);
  }
  __syncthreads();

  // This warpgroup's 64 rows of query tile qt (rows past the sequence zero-filled).
  auto load_q = [&](int qt) {
    const int64_t stride = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * D;
    const int first = wg * 64 + (tid % 128) / kChunks;
    const T* src = qkv + (tp.q_begin + qt * kBlockM + first) * stride + tp.h * D + cc * 8;
    const int rows = tp.q_len - qt * kBlockM - first;
#pragma unroll
    for (int i = 0; i < kQPasses; ++i) {
      const bool ok = i * kQRowStep < rows;
      cp16(sQ + sw128(first + i * kQRowStep, cc), ok ? src + i * kQRowStep * stride : qkv,
           ok ? 16 : 0);
    }
  };
  // Launched plainly (launch_prefill says why): q's copies go out first, beside the table reads.
  if constexpr (!Paired) load_q(tp.qt);
  // Cache slots of this thread's rows of stream tile `tile` (-1 past the query tile's keys:
  // zero-filled, and masked).
  int slot[kPasses];
  auto fetch_slots = [&](int tile) {
    const bool second = Paired && tile >= n_first;
    const int key_tile = second ? tile - n_first : tile + k0_first;
    const int n_keys = second ? keys_second : keys_first;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int j = key_tile * kBlockN + r0 + i * kRowStep;
      const uint32_t u = j;
      const uint32_t blk = (__umulhi(u, bs_magic) + u) >> bs_shift;  // j / block_size
      slot[i] = j < n_keys ? tp.table[blk] * block_size + (j - static_cast<int>(blk) * block_size)
                           : -1;
    }
  };
  auto load_rows = [&](uint32_t dst, const T* head) {
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const bool ok = slot[i] >= 0;
      cp16(dst + sw128(r0 + i * kRowStep, cc),
           head + (ok ? static_cast<int64_t>(slot[i]) * tp.kv_row : 0),
           ok ? 16 : 0);
    }
  };
  const T* k_head = k_cache + static_cast<int64_t>(tp.kvh) * D + cc * 8;
  const T* v_head = v_cache + static_cast<int64_t>(tp.kvh) * D + cc * 8;
  auto stage_k = [&](int stage) { return sQ + (1 + 2 * stage) * kTileBytes; };
  fetch_slots(0);
  if constexpr (Paired) {
    // Launched overlapping the previous kernel (launch.h): the first block-table reads (the step's
    // metadata, copied from the host before the step's first kernel) go before the wait; q and
    // the cache, which that kernel (RoPE + cache write) may still be writing, after it.
    wait_for_prior_kernels();
    let_next_kernel_start();
    load_q(tp.qt);
  }
  load_rows(stage_k(0), k_head);
  load_rows(stage_k(0) + kTileBytes, v_head);
  mbar_arrive_cp_async(full);
  if (n_total > 1) {
    fetch_slots(1);
    load_rows(stage_k(1), k_head);
    load_rows(stage_k(1) + kTileBytes, v_head);
    mbar_arrive_cp_async(full + 8);
  }
  if (n_total > 2) fetch_slots(2);

  const int g = lane / 4, t = lane % 4;
  const int row_in_tile = wg * 64 + warp * 16 + g;  // this lane's rows: this one and 8 below
  float o[kRegions][32];
#pragma unroll
  for (int b = 0; b < kRegions; ++b) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[b][i] = 0.0f;
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const uint32_t sQ_wg = sQ + wg * 64 * 128;

  // S of the tile's 128 keys (n8 chunk i: [4i], [4i+1] in the lane's first row, [4i+2], [4i+3]
  // in its second), and P as the A fragments of 16 keys each.
  float s[64];
  uint32_t p[8][4];
  auto issue_s = [&](uint32_t sK) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk / 4) * kRegionBytes + (kk % 4) * 32;
      if (kk == 0) {
        wgmma_ss_n128_zero<T>(s, smem_desc(sQ_wg + koff), smem_desc(sK + koff));
      } else {
        wgmma_ss_n128<T>(s, smem_desc(sQ_wg + koff), smem_desc(sK + koff), 1);
      }
    }
  };
  auto rescale = [&](float alpha0, float alpha1) { rescale_rows(o, alpha0, alpha1); };
  auto pin_all = [&] { pin_registers(o, s, p); };
  // Softmax of the current query tile's key tile `key_tile` from one running max.
  auto softmax = [&](float& alpha0, float& alpha1, int key_tile) {
    const int key_base = (key_tile + tp.k_tile0) * kBlockN;
    if constexpr (Ext) {
      if (cap.on) soft_cap_scores<64>(s, cap);
      if (key_base + kBlockN > tp.n_keys || (causal && key_base + kBlockN - 1 > tp.first_pos) ||
          (window > 0 && key_base < tp.first_pos + kBlockM - window)) {
        const int qpos0 = tp.first_pos + row_in_tile, qpos1 = qpos0 + 8;
        mask_scores_window<16>(s, key_base + 2 * t, window_first_key(qpos0, window),
                               causal ? min(qpos0, tp.ctx - 1) : tp.ctx - 1,
                               window_first_key(qpos1, window),
                               causal ? min(qpos1, tp.ctx - 1) : tp.ctx - 1);
      }
    } else if (key_base + kBlockN > tp.n_keys || (causal && key_base + kBlockN - 1 > tp.first_pos)) {
      const int qpos0 = tp.first_pos + row_in_tile, qpos1 = qpos0 + 8;
      if constexpr (Paired) {
        mask_scores<16>(s, key_base + 2 * t, causal ? min(qpos0, tp.ctx - 1) : tp.ctx - 1,
                        causal ? min(qpos1, tp.ctx - 1) : tp.ctx - 1);
      } else {
        // Per-score tests (a divergent branch each): with mask_scores here, ptxas moves this
        // kernel's O rescale behind the turn barrier, and the shapes that never mask (every
        // non-causal one of `tessera bench kernels`) ran 1-3% slower on an H100.
#pragma unroll
        for (int n = 0; n < 16; ++n) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key_base + n * 8 + 2 * t + e;
            if (key >= tp.ctx || (causal && key > qpos0)) s[4 * n + e] = -INFINITY;
            if (key >= tp.ctx || (causal && key > qpos1)) s[4 * n + 2 + e] = -INFINITY;
          }
        }
      }
    }
    online_softmax_tile<T, 16>(s, scale_log2, m0, m1, l0, l1, alpha0, alpha1, p);
  };
  // O / l of the current query tile to `out`.
  auto store = [&] {
    const float2 inv = reduce_row_sums(l0, l1);
    const float inv0 = inv.x, inv1 = inv.y;
    const int64_t out_stride = static_cast<int64_t>(num_heads) * D;
    const int row0 = tp.qt * kBlockM + row_in_tile;
    T* o0 = out + (tp.q_begin + row0) * out_stride + static_cast<int64_t>(tp.h) * D + 2 * t;
    T* o1 = o0 + 8 * out_stride;
    store_rows(o, inv0, inv1, o0, o1, row0 < tp.q_len, row0 + 8 < tp.q_len);
  };
  // Ping-pong: the warpgroups take turns issuing their wgmmas (named barriers 1 and 2: a turn
  // waits for the other warpgroup's previous turn to be issued), so one warpgroup's softmax runs
  // while the other's matrix products do. Warpgroup 0 goes first.
  // Counts, not branches, keep the warpgroups' code paths alike (ptxas serializes wgmmas behind
  // warpgroup-divergent branches): warpgroup 0's first turn and warpgroup 1's final wait count
  // only their own 128 threads; warpgroup 0's final wait takes warpgroup 1's last pass.
  auto turn_wait = [&](int count) {
    named_bar_sync(1 + wg, count);
  };
  auto turn_pass = [&] {
    named_bar_arrive(2 - wg, kThreads);
  };
  mbar_wait(full, 0);
  fence_proxy_async();
  turn_wait(128 + 128 * wg);
  wgmma_fence();
  issue_s(stage_k(0));
  wgmma_commit();
  turn_pass();
  wgmma_wait<0>();
  if (lane == 0) mbar_arrive(k_free);
  // Per stream tile j: softmax of S_j (nothing in flight: ptxas would serialize the wgmmas
  // otherwise), then one turn queues P_j V_j and S_{j+1}; behind it the copies of tile j+2 go into
  // the stage of tile j-1 (K as soon as every warpgroup's S_{j-1} retired, V after its
  // P_{j-1} V_{j-1}). After the first query tile's last P V, its output is stored while the other
  // warpgroup's turn runs.
  int key_tile = 0;  // tile j's index among its query tile's key tiles
  for (int tile = 0; tile < n_total; ++tile, ++key_tile) {
    const int stage = tile % 3;
    const uint32_t sV = stage_k(stage) + kTileBytes;
    // S_j retired: if it is the first query tile's last, this warpgroup's Q rows are free and
    // take the second query tile's.
    if constexpr (Paired) {
      if (tile == n_first - 1 && n_total > n_first) {
        load_q(qt_second);
        mbar_arrive_cp_async(q_full + 8 * wg);
      }
    }
    float alpha0, alpha1;
    pin_all();
    softmax(alpha0, alpha1, key_tile);
    rescale(alpha0, alpha1);
    const bool next = tile + 1 < n_total, load = tile + 2 < n_total;
    const bool switches = Paired && tile + 1 == n_first && next;  // S_{j+1}: the second tile's
    if (next) {
      mbar_wait(full + 8 * ((tile + 1) % 3), ((tile + 1) / 3) & 1);
      if (switches) mbar_wait(q_full + 8 * wg, 0);
      fence_proxy_async();
    }
    turn_wait(kThreads);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      if constexpr (kRegions == 2) {
        wgmma_rs_n128_tb<T>(o[0], o[1], p[kk], smem_desc_mn(sV + kk * 16 * 128));
      } else {
#pragma unroll
        for (int b = 0; b < kRegions; ++b) {
          wgmma_rs_n64_tb<T>(o[b], p[kk], smem_desc(sV + b * kRegionBytes + kk * 16 * 128));
        }
      }
    }
    if (next) issue_s(stage_k((tile + 1) % 3));
    wgmma_commit();
    turn_pass();
    const int ls = (tile + 2) % 3;
    const uint32_t parity = ((tile + 2) / 3 - 1) & 1;  // tile - 1 used the stage
    if (load) {
      if (tile >= 1) mbar_wait(k_free + 8 * ls, parity);
      load_rows(stage_k(ls), k_head);
    }
    if (load) {
      if (tile >= 1) mbar_wait(v_free + 8 * ls, parity);
      load_rows(stage_k(ls) + kTileBytes, v_head);
      mbar_arrive_cp_async(full + 8 * ls);
    }
    wgmma_wait<0>();
    if constexpr (Paired) pin_all();  // O is read below (store) only after this wait
    if (lane == 0) {
      mbar_arrive(v_free + 8 * stage);
      if (next) mbar_arrive(k_free + 8 * ((tile + 1) % 3));
    }
    if (load && tile + 3 < n_total) fetch_slots(tile + 3);
    if (switches) {
      // O and l start over through the next rescale: with the running max back at -inf its
      // factor is 0 (writing wgmma's accumulators in this branch made ptxas serialize the wgmmas).
      store();
      m0 = m1 = -INFINITY;
      tp.set_tile(qt_second, causal);
      key_tile = -1;
    }
  }
  turn_wait(kThreads - 128 * wg);
  pin_all();
  store();
#else
  // Built without sm_90a machine code (kernels/CMakeLists.txt's gencode list): the launcher picks
  // this kernel on sm_90 devices only, so reaching this body means the build lost its sm_90a code.
  __trap();
#endif  // TESSERA_PREFILL_SM90
}

template <int D>
constexpr int smem_bytes() {  // Q, 3 stages of K and V (16-bit elements), alignment
  return 7 * kBlockM * D * 2 + 1024;
}

// d = 256 (Gemma 2/3) on sm_90a: the same CTA (128 queries, two warpgroups of 64 rows taking
// turns on the tensor cores) over 64-key tiles, since a warpgroup's O is already 128 fp32
// registers a thread at d = 256. Shared memory: Q (64 KiB) and two stages each of K and V
// (32 KiB a tile): 193 KiB, one CTA per multiprocessor. K and V stages have barriers of their own
// so that each copy gets about a key tile's time in flight with two stages: K_{j+2} goes into
// K_j's stage right after the turn that queues S_{j+1} (S_j has retired in every warp), V_{j+1}
// into V_{j-1}'s (P_{j-1} V_{j-1} has retired). S = Q K^T runs as wgmma m64n64k16 (both operands
// from shared memory), O += P V as two m64n128k16 per 16 keys (P in registers, V N-major). A copy
// warp takes whole 512-byte rows (lane = 16-byte chunk); lanes 0-7 look up the cache slots of its
// 8 rows of a tile once, a tile ahead, and the copies take them by shuffle.
constexpr int kD256BlockN = 64;
constexpr int kD256TileBytes = kD256BlockN * 256 * 2;  // a K or V tile

template <typename T, bool Ext>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_kernel_d256(const T* __restrict__ qkv, const T* __restrict__ k_cache,
                        const T* __restrict__ v_cache, int32_t block_size, uint32_t bs_magic,
                        int32_t bs_shift, DeviceStep step, int32_t num_heads, int32_t num_kv_heads,
                        float scale_log2, bool causal, SoftCapArgs cap, int32_t window,
                        T* __restrict__ out) {
#if defined(TESSERA_PREFILL_SM90)
  constexpr int D = 256, kN = kD256BlockN;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // full_k, full_v (every thread's copies of the stage's tile landed), k_free, v_free (every
  // warp's wgmmas reading it retired); two stages each.
  __shared__ __align__(8) uint64_t bars[8];
  const uint32_t raw = sm80::smem_addr(smem_raw);
  const uint32_t sQ = (raw + 1023) & ~1023u;
  const uint32_t full_k = sm80::smem_addr(bars), full_v = full_k + 16, k_free = full_k + 32,
                 v_free = full_k + 48;
  auto stage_k = [&](int s) { return sQ + kBlockM * D * 2 + s * kD256TileBytes; };
  auto stage_v = [&](int s) { return sQ + kBlockM * D * 2 + (2 + s) * kD256TileBytes; };

  PrefillTile<D, kBlockM, kN> tp;
  tp.init(step, num_heads, num_kv_heads);
  if (!tp.set_tile(gridDim.x - 1 - blockIdx.x, causal, Ext ? window : 0)) return;
  const int n = tp.n_tiles;
  const int tid = threadIdx.x;
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int cw = tid / 32;  // copy warp: rows cw + 8i of every tile, lane = chunk

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      mbar_init(full_k + 8 * s, kThreads);
      mbar_init(full_v + 8 * s, kThreads);
      mbar_init(k_free + 8 * s, kThreads / 32);
      mbar_init(v_free + 8 * s, kThreads / 32);
    }
  }
  __syncthreads();

  {  // Q: rows past the sequence zero-filled.
    const T* src = qkv + static_cast<int64_t>(tp.q_begin + tp.qt * kBlockM) * tp.qkv_stride +
                   static_cast<int64_t>(tp.h) * D + lane * 8;
#pragma unroll
    for (int i = 0; i < kBlockM / 8; ++i) {
      const int r = cw + 8 * i;
      const bool ok = r < tp.rows;
      cp16(sQ + sw128(r, lane), ok ? src + r * tp.qkv_stride : qkv, ok ? 16 : 0);
    }
  }
  // Lanes 0-7 (and their copies 8-31): the cache slot of row cw + 8 (lane % 8) of key tile
  // `tile` (-1 past the query tile's keys: zero-filled, and masked).
  auto fetch_slot = [&](int tile) {
    const int j = (tile + tp.k_tile0) * kN + cw + 8 * (lane & 7);
    const uint32_t u = j;
    const uint32_t blk = (__umulhi(u, bs_magic) + u) >> bs_shift;  // j / block_size
    return j < tp.n_keys ? tp.table[blk] * block_size + (j - static_cast<int>(blk) * block_size)
                         : -1;
  };
  auto load_tile = [&](uint32_t dst, const T* head, int slots) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int slot = __shfl_sync(0xffffffffu, slots, i);
      const bool ok = slot >= 0;
      cp16(dst + sw128_64(cw + 8 * i, lane), head + (ok ? static_cast<int64_t>(slot) * tp.kv_row : 0),
           ok ? 16 : 0);
    }
  };
  const T* k_head = k_cache + static_cast<int64_t>(tp.kvh) * D + lane * 8;
  const T* v_head = v_cache + static_cast<int64_t>(tp.kvh) * D + lane * 8;
  // slots_a: key tile j+1's, slots_b: j+2's (j: the loop's tile).
  int slots_a = fetch_slot(0);
  load_tile(stage_k(0), k_head, slots_a);
  mbar_arrive_cp_async(full_k);
  load_tile(stage_v(0), v_head, slots_a);
  mbar_arrive_cp_async(full_v);
  slots_a = n > 1 ? fetch_slot(1) : -1;
  if (n > 1) {
    load_tile(stage_k(1), k_head, slots_a);
    mbar_arrive_cp_async(full_k + 8);
  }
  int slots_b = n > 2 ? fetch_slot(2) : -1;

  const int g = lane / 4, t = lane % 4;
  const int row_in_tile = wg * 64 + warp * 16 + g;  // this lane's rows: this one and 8 below
  float o[4][32];
#pragma unroll
  for (int b = 0; b < 4; ++b) {
#pragma unroll
    for (int i = 0; i < 32; ++i) o[b][i] = 0.0f;
  }
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const uint32_t sQ_wg = sQ + wg * 64 * 128;

  // S of the tile's 64 keys (n8 chunk i: [4i], [4i+1] in the lane's first row, [4i+2], [4i+3] in
  // its second), and P as the A fragments of 16 keys each.
  float s[32];
  uint32_t p[4][4];
  auto issue_s = [&](uint32_t sK) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t qoff = (kk / 4) * kRegionBytes + (kk % 4) * 32;
      const uint32_t koff = (kk / 4) * kD256RegionBytes + (kk % 4) * 32;
      if (kk == 0) {
        wgmma_ss_n64_zero<T>(s, smem_desc(sQ_wg + qoff), smem_desc(sK + koff));
      } else {
        wgmma_ss_n64<T>(s, smem_desc(sQ_wg + qoff), smem_desc(sK + koff));
      }
    }
  };
  auto pin_all = [&] { pin_registers(o, s, p); };
  const int qpos0 = tp.first_pos + row_in_tile, qpos1 = qpos0 + 8;
  const int last0 = causal ? min(qpos0, tp.ctx - 1) : tp.ctx - 1;
  const int last1 = causal ? min(qpos1, tp.ctx - 1) : tp.ctx - 1;
  // Softmax of key tile `tile` (of the query tile's n): P, and the O rescale factors.
  auto softmax = [&](float& alpha0, float& alpha1, int tile) {
    const int key_base = (tile + tp.k_tile0) * kN;
    const bool edge =
        key_base + kN > tp.n_keys || (causal && key_base + kN - 1 > tp.first_pos);
    if constexpr (Ext) {
      if (cap.on) soft_cap_scores<32>(s, cap);
      if (edge || (window > 0 && key_base < tp.first_pos + kBlockM - window)) {
        mask_scores_window<8>(s, key_base + 2 * t, window_first_key(qpos0, window), last0,
                              window_first_key(qpos1, window), last1);
      }
    } else if (edge) {
      mask_scores<8>(s, key_base + 2 * t, last0, last1);
    }
    online_softmax_tile<T, 8>(s, scale_log2, m0, m1, l0, l1, alpha0, alpha1, p);
  };
  auto rescale = [&](float alpha0, float alpha1) { rescale_rows(o, alpha0, alpha1); };
  // Ping-pong turns as in prefill_kernel above (named barriers 1 and 2; warpgroup 0 first).
  auto turn_wait = [&](int count) { named_bar_sync(1 + wg, count); };
  auto turn_pass = [&] { named_bar_arrive(2 - wg, kThreads); };
  mbar_wait(full_k, 0);
  fence_proxy_async();
  turn_wait(128 + 128 * wg);
  wgmma_fence();
  issue_s(stage_k(0));
  wgmma_commit();
  turn_pass();
  wgmma_wait<0>();
  if (lane == 0) mbar_arrive(k_free);
  for (int j = 0; j < n; ++j) {
    const int st = j & 1, ph = (j >> 1) & 1;  // tile j's stages and their phase parity
    const bool next = j + 1 < n;
    float alpha0, alpha1;
    pin_all();
    softmax(alpha0, alpha1, j);
    rescale(alpha0, alpha1);
    if (next) mbar_wait(full_k + 8 * (st ^ 1), ((j + 1) >> 1) & 1);
    mbar_wait(full_v + 8 * st, ph);
    fence_proxy_async();
    turn_wait(kThreads);
    wgmma_fence();
    const uint32_t sV = stage_v(st);
#pragma unroll
    for (int kk = 0; kk < kN / 16; ++kk) {
      wgmma_rs_n128_tb<T>(o[0], o[1], p[kk], smem_desc_mn64(sV + kk * 16 * 128));
      wgmma_rs_n128_tb<T>(o[2], o[3], p[kk],
                          smem_desc_mn64(sV + 2 * kD256RegionBytes + kk * 16 * 128));
    }
    if (next) issue_s(stage_k(st ^ 1));
    wgmma_commit();
    turn_pass();
    if (j + 2 < n) {  // K_{j+2} into K_j's stage once every warp's S_j retired
      mbar_wait(k_free + 8 * st, ph);
      load_tile(stage_k(st), k_head, slots_b);
      mbar_arrive_cp_async(full_k + 8 * st);
    }
    if (next) {  // V_{j+1} into V_{j-1}'s stage once every warp's P_{j-1} V_{j-1} retired
      if (j >= 1) mbar_wait(v_free + 8 * (st ^ 1), ((j - 1) >> 1) & 1);
      load_tile(stage_v(st ^ 1), v_head, slots_a);
      mbar_arrive_cp_async(full_v + 8 * (st ^ 1));
    }
    wgmma_wait<0>();
    if (lane == 0) {
      mbar_arrive(v_free + 8 * st);
      if (next) mbar_arrive(k_free + 8 * (st ^ 1));
    }
    slots_a = slots_b;
    if (j + 3 < n) slots_b = fetch_slot(j + 3);
  }
  turn_wait(kThreads - 128 * wg);
  pin_all();

  const float2 inv = reduce_row_sums(l0, l1);
  const int64_t out_stride = static_cast<int64_t>(num_heads) * D;
  const int row0 = tp.qt * kBlockM + row_in_tile;
  T* o0 = out + (tp.q_begin + row0) * out_stride + static_cast<int64_t>(tp.h) * D + 2 * t;
  T* o1 = o0 + 8 * out_stride;
  store_rows(o, inv.x, inv.y, o0, o1, row0 < tp.q_len, row0 + 8 < tp.q_len);
#else
  __trap();  // built without sm_90a machine code (see prefill_kernel above)
#endif  // TESSERA_PREFILL_SM90
}

constexpr int kD256SmemBytes = kBlockM * 256 * 2 + 4 * kD256TileBytes + 1024;  // Q, K/V stages

}  // namespace hopper

template <typename T, int D>
gpuError_t launch_prefill(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                          const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                          float scale, bool causal, float softcap, int32_t window, T* out,
                          gpuStream_t stream) {
  // The wgmma kernels: prefill_kernel at d = 64 and 128, prefill_kernel_d256 at d = 256 (the
  // former's three K/V stages of 128 keys would not fit in shared memory there, nor its
  // accumulators in registers).
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
      if constexpr (D == 256) {
        for (auto* kernel : {hopper::prefill_kernel_d256<T, false>,
                             hopper::prefill_kernel_d256<T, true>}) {
          err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     hopper::kD256SmemBytes);
          if (err != gpuSuccess) return err;
        }
      } else {
        for (auto* kernel : {hopper::prefill_kernel<T, D, false, false>,
                             hopper::prefill_kernel<T, D, true, false>,
                             hopper::prefill_kernel<T, D, false, true>}) {
          err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     hopper::smem_bytes<D>());
          if (err != gpuSuccess) return err;
        }
      }
    }
    if (kind == kMma) {
      err = cudaFuncSetAttribute(prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kMmaSmemBytes<D>);
    }
    if (err != gpuSuccess) return err;
    if (device < 64) chosen[device].store(kind, std::memory_order_release);
  }
  const float scale_log2 = scale * 1.4426950408889634f;
  const SoftCapArgs cap = make_soft_cap(scale, softcap);
  if (window < 0) window = 0;
  if (kind != kMma) {
    const int query_tiles = (step.max_prefill_q + hopper::kBlockM - 1) / hopper::kBlockM;
    // j / block_size as (umulhi(j, magic) + j) >> shift for 0 <= j < 2^31, shift = ceil(log2
    // block_size), magic = floor(2^32 (2^shift - block_size) / block_size) + 1
    // (Granlund-Montgomery).
    const int shift =
        block_size > 1 ? 32 - __builtin_clz(static_cast<uint32_t>(block_size - 1)) : 0;
    const uint32_t magic = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << shift) - block_size)) / block_size + 1);
    const dim3 grid(query_tiles, num_heads, step.num_prefill_seqs);
    if constexpr (D == 256) {
      // Soft-capped or windowed: the Ext instantiation; no pairs at d = 256 yet.
      if (cap.on || window > 0) {
        hopper::prefill_kernel_d256<T, true>
            <<<grid, hopper::kThreads, hopper::kD256SmemBytes, stream>>>(
                qkv, k_cache, v_cache, block_size, magic, shift, step, num_heads, num_kv_heads,
                scale_log2, causal, cap, window, out);
      } else {
        hopper::prefill_kernel_d256<T, false>
            <<<grid, hopper::kThreads, hopper::kD256SmemBytes, stream>>>(
                qkv, k_cache, v_cache, block_size, magic, shift, step, num_heads, num_kv_heads,
                scale_log2, causal, cap, window, out);
      }
      return gpuGetLastError();
    } else {
      // Soft-capped or windowed: the Ext instantiation, unpaired (a windowed query tile's cost no
      // longer grows with its index, which is what the pairs even out), launched plainly as the
      // unpaired plain one is.
      if (cap.on || window > 0) {
        hopper::prefill_kernel<T, D, false, true>
            <<<grid, hopper::kThreads, hopper::smem_bytes<D>(), stream>>>(
                qkv, k_cache, v_cache, block_size, magic, shift, step, num_heads, num_kv_heads,
                scale_log2, causal, cap, window, out);
        return gpuGetLastError();
      }
      // Short causal prefills take query tiles in pairs (the kernel's header says why). Measured
      // on an H100: +2-20% at 1024 causal queries; at 4096 and beyond, and without the causal
      // mask, the pairs lose 2-20% (the paired kernel's loop runs slower per key tile; not
      // understood yet). Only the paired kernel is launched overlapping the kernel before it
      // (launch.h): the unpaired one, built so (wait, then q's copies behind the first table
      // reads), ran about 1% (0-2%) slower on the shapes it serves in two H100 calls though its
      // loop's instructions stayed the same (registers aside), and the overlap gained nothing
      // measurable in `tessera bench kernels`, whose timed calls are bracketed by events.
      if (causal && query_tiles <= 8) {
        const dim3 paired((query_tiles + 1) / 2, num_heads, step.num_prefill_seqs);
        return launch(hopper::prefill_kernel<T, D, true, false>, paired, dim3(hopper::kThreads),
                      hopper::smem_bytes<D>(), stream, qkv, k_cache, v_cache, block_size, magic,
                      shift, step, num_heads, num_kv_heads, scale_log2, causal, cap, window, out);
      }
      hopper::prefill_kernel<T, D, false, false>
          <<<grid, hopper::kThreads, hopper::smem_bytes<D>(), stream>>>(
              qkv, k_cache, v_cache, block_size, magic, shift, step, num_heads, num_kv_heads,
              scale_log2, causal, cap, window, out);
      return gpuGetLastError();
    }
  }
  const dim3 grid((step.max_prefill_q + kMmaBlockM<D> - 1) / kMmaBlockM<D>, num_heads,
                  step.num_prefill_seqs);
  return launch(prefill_kernel<T, D>, grid, dim3(kMmaThreads<D>), kMmaSmemBytes<D>, stream,
                qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads, scale_log2, causal,
                cap, window, out);
}

}  // namespace

bool prefill_kernel_supported(int32_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

template <typename T>
gpuError_t attention_prefill(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                             const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim, float scale, bool causal, float softcap,
                             int32_t window, T* out, gpuStream_t stream) {
  if (step.num_prefill_seqs <= 0) return gpuSuccess;
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0) return gpuErrorInvalidValue;
  switch (head_dim) {
    case 64:
      return launch_prefill<T, 64>(qkv, k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                                   scale, causal, softcap, window, out, stream);
    case 128:
      return launch_prefill<T, 128>(qkv, k_cache, v_cache, block_size, step, num_heads,
                                    num_kv_heads, scale, causal, softcap, window, out, stream);
    case 256:
      return launch_prefill<T, 256>(qkv, k_cache, v_cache, block_size, step, num_heads,
                                    num_kv_heads, scale, causal, softcap, window, out, stream);
    default:
      return gpuErrorInvalidValue;
  }
}

#else  // HIP: no tensor-core prefill yet

bool prefill_kernel_supported(int32_t) { return false; }

template <typename T>
gpuError_t attention_prefill(const T*, const T*, const T*, int32_t, const DeviceStep&, int32_t,
                             int32_t, int32_t, float, bool, float, int32_t, T*, gpuStream_t) {
  return gpuErrorInvalidValue;
}

#endif

#define TESSERA_PREFILL_LAUNCHER(T)                                                            \
  template gpuError_t attention_prefill(const T*, const T*, const T*, int32_t, const DeviceStep&, \
                                        int32_t, int32_t, int32_t, float, bool, float, int32_t, T*, \
                                        gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_PREFILL_LAUNCHER)
#undef TESSERA_PREFILL_LAUNCHER

}  // namespace tessera::gpu
