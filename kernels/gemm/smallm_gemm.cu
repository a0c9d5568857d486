// The small-M kernels (see smallm_gemm.h).
//
// Fragment trick of the mma kernels: a dot product does not care in which order k is summed, so
// lane (g = lane / 4, t = lane % 4) loads 16 contiguous bytes -- k = 8t .. 8t+7 of a 32-wide k
// chunk -- of w rows g and g + 8 and of x tokens g and g + 8, and uses them as they are: the
// first two element pairs are the A/B fragment registers of one m16n8k16 (logical k 2t, 2t+8 map
// to physical 8t, 8t+2), the last two pairs those of a second one. A and B agree on the
// permutation, so the products are those of the true GEMM, with no shared-memory staging and
// no ldmatrix. The same holds for bf16 and fp16 (both 2-byte elements, one fragment layout).
//
// That layout loads 64 bytes of each of 8 rows per warp instruction: half lines, which device
// memory serves more slowly than whole ones. Reading o's 34 MB that way alone (no MMAs) reached
// 80% of an H100's copy bandwidth, with whole lines (256 bytes of 2 rows per instruction) 84%,
// down's 117 MB 79% and 98% (2026-11-23). smallm_line_kernel loads whole lines and moves the
// 16-byte pieces to their fragment lanes with two butterfly exchanges between lanes and
// registers (shuffles).
//
// FP8 weights: the same kernels over another weight format (Fp8Weights below). A lane's 16 bytes
// of a row are then 16 k -- a 64-wide k chunk per lane group of four -- and the x it meets 32
// bytes (two vectors) per token. Each 32-bit word of codes widens to two pairs of x's type,
// codes (0, 2) and (1, 3) (fp8_widen.h, exact), times a power of two (2^120 for bf16) in a packed
// 16-bit multiply: the fragment trick once more, with x's words permuted alike (one byte_perm per
// pair). The power of two is multiplied in before the MMA rather than folded into the epilogue's
// scale: left out, bf16 weights would sit 2^120 below their values, e4m3 subnormals on bf16
// subnormals (which the tensor cores might flush), and the fp32 products and sums within 2^6 of
// fp32's underflow. The FMA kernel widens to fp16 whatever x's type (fp16 holds every code times
// 2^-8 exactly, and converts to normal fp32 values) and folds 2^8 into the scale, where it is
// harmless: products of fp16-range weights and x stay far above fp32's underflow unless x's own
// are below 2^-118.
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gemm/smallm_gemm.h"

#include <algorithm>
#include <type_traits>

#include "kernels/gemm/fp8_widen.h"
#include "kernels/launch.h"
#include "kernels/mma_sm80.h"

namespace tessera::gpu {

namespace {

// Every kernel is a template over T, the element type of x (and of out unless fp32): gpu_bf16 or
// gpu_f16, and over the format of w (PlainWeights<T>, Fp8Weights<T>). T enters only through
// Element<T> (store(), unpack()) and the MMA's instruction (mma_chunk()); the loads move 16-byte
// vectors whatever the type.

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kMaxSplits = 16;
// Two CTAs per SM at least: with no minimum, ptxas capped two of the kernels at 48 and 64
// registers and spilled (CUDA 13.0, sm_90a); the hint gives them up to 128.
constexpr int kMinBlocks = 2;
// Split ranges are whole multiples of every kernel's k per step (8 warps x 32 for the mma
// kernels, x 64 with FP8 weights, x 128 for the line kernel; lanes x 8, up to 512 with 64-lane
// wavefronts, for the FMA kernel), so that no split ends inside another's step. Splits that start
// past k are empty: their partials are zeros. (The FMA kernel's step with FP8 weights, lanes x 16,
// is 1024 with 64-lane wavefronts: a split may end inside one there, which costs balance, not
// correctness -- every load is bounded by its own split's end.)
constexpr int64_t kSplitAlign = 512;

template <typename T>
__device__ __forceinline__ void store(void* out, bool out_f32, int64_t i, float v) {
  if (out_f32) {
    static_cast<float*>(out)[i] = v;
  } else {
    static_cast<T*>(out)[i] = from_float<T>(v);
  }
}

// One output element: straight to out when k is not split (gridDim.y == 1), else to this
// CTA's split of the partials [splits, m, n].
template <typename T>
__device__ __forceinline__ void store_result(void* out, bool out_f32, float* partial, int64_t mn,
                                             int64_t i, float v) {
  if (gridDim.y > 1) {
    partial[blockIdx.y * mn + i] = v;
  } else {
    store<T>(out, out_f32, i, v);
  }
}

// The kCount elements of T at p (kCount / 8 16-byte vectors) as floats.
template <typename T, int kCount>
__device__ __forceinline__ void unpack(const T* p, float (&f)[kCount]) {
  using E = Element<T>;
#pragma unroll
  for (int v = 0; v < kCount / 8; ++v) {
    const uint4 u = *reinterpret_cast<const uint4*>(p + 8 * v);
    float* o = f + 8 * v;
    o[0] = E::lo(u.x), o[1] = E::hi(u.x), o[2] = E::lo(u.y), o[3] = E::hi(u.y);
    o[4] = E::lo(u.z), o[5] = E::hi(u.z), o[6] = E::lo(u.w), o[7] = E::hi(u.w);
  }
}

#if defined(TESSERA_CUDA)

// One 32-wide k chunk of a 16-row tile of w (the fragment trick above): a_g / a_g8 are the lane's
// 16 bytes of rows g and g + 8, b[0] / b[1] those of tokens g and g + 8 (b[1] only used at m > 8).
template <typename T>
__device__ __forceinline__ void mma_chunk(float (&acc)[2][4], const uint4& a_g, const uint4& a_g8,
                                          const uint4 (&b)[2], bool two_token_tiles) {
  const uint32_t lo[4] = {a_g.x, a_g8.x, a_g.y, a_g8.y};
  const uint32_t hi[4] = {a_g.z, a_g8.z, a_g.w, a_g8.w};
  sm80::mma_16816<T>(acc[0], lo, b[0].x, b[0].y);
  sm80::mma_16816<T>(acc[0], hi, b[0].z, b[0].w);
  if (two_token_tiles) {
    sm80::mma_16816<T>(acc[1], lo, b[1].x, b[1].y);
    sm80::mma_16816<T>(acc[1], hi, b[1].z, b[1].w);
  }
}

// Four codes of w widened to two pairs of T holding their values (fp8_widen.h): the bit placement,
// then the power of two multiplied in.
template <typename T>
__device__ __forceinline__ Fp8WidePairs widen_codes(uint32_t q) {
  constexpr int kExpBits = kFp8WideExpBits<T>;
  constexpr uint32_t kUnit = fp8_widen_unit_bits(kExpBits, kSmallMFp8Encoding);
  const Fp8WidePairs p = fp8_widen_e4m3x4<kExpBits>(q);
  return {fp8_widened_times_unit<kExpBits>(p.even, kUnit),
          fp8_widened_times_unit<kExpBits>(p.odd, kUnit)};
}

// x's elements 0 1 2 3 (two words, each a pair) as the pairs (0, 2) and (1, 3), in place: the
// order fp8_widen_e4m3x4 gives the codes in. Done once per load, for every row tile after it.
__device__ __forceinline__ void pair_as_widened(uint32_t& lo, uint32_t& hi) {
  const uint32_t even = __byte_perm(lo, hi, 0x5410), odd = __byte_perm(lo, hi, 0x7632);
  lo = even, hi = odd;
}

// One 64-wide k chunk of a 16-row tile of FP8 w: a_g / a_g8 are the lane's 16 codes of rows g and
// g + 8, b[v][nt] x's vector v (k 8v .. 8v + 7 of the lane's 16) of token tile nt, paired by
// pair_as_widened. Word i of the codes widens to the pairs of codes (4i, 4i+2) and (4i+1, 4i+3),
// the A registers of one m16n8k16; x's words 2i, 2i+1 hold the same pairs for B.
template <typename T>
__device__ __forceinline__ void mma_fp8_chunk(float (&acc)[2][4], const uint4& a_g,
                                              const uint4& a_g8, const uint4 (&b)[2][2],
                                              bool two_token_tiles) {
  const uint32_t q_g[4] = {a_g.x, a_g.y, a_g.z, a_g.w};
  const uint32_t q_g8[4] = {a_g8.x, a_g8.y, a_g8.z, a_g8.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const Fp8WidePairs w_g = widen_codes<T>(q_g[i]), w_g8 = widen_codes<T>(q_g8[i]);
    const uint32_t a[4] = {w_g.even, w_g8.even, w_g.odd, w_g8.odd};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      if (nt == 1 && !two_token_tiles) break;
      const uint4& v = b[i / 2][nt];
      sm80::mma_16816<T>(acc[nt], a, i % 2 ? v.z : v.x, i % 2 ? v.w : v.y);
    }
  }
}

#endif  // TESSERA_CUDA

// The formats of w. Each gives the kernels
//   Element, Code   the element types of x and of w;
//   kVectorK        the k of a 16-byte vector of w (x's k of it are kVectorK / 8 vectors);
//   pair_x()        (CUDA) x's vectors b as mma() takes them, once per load;
//   mma()           (CUDA) the MMAs of one vector of rows g and g + 8 against x's vectors b;
//   unpack_w()      (FMA kernel) a vector of w as floats in k order, times 1 / kFmaUnit;
//   scaled()        the output element of a row from its fp32 sum (the epilogue).
// A format object is a kernel argument: what the epilogue reads (nothing for PlainWeights).
template <typename T>
struct PlainWeights {
  using Element = T;
  using Code = T;
  static constexpr int kVectorK = 8;
  static constexpr float kFmaUnit = 1.0f;
#if defined(TESSERA_CUDA)
  __device__ __forceinline__ static void pair_x(uint4 (&)[1][2]) {}
  __device__ __forceinline__ static void mma(float (&acc)[2][4], const uint4& a_g,
                                             const uint4& a_g8, const uint4 (&b)[1][2],
                                             bool two_token_tiles) {
    mma_chunk<T>(acc, a_g, a_g8, b[0], two_token_tiles);
  }
#endif
  __device__ __forceinline__ static void unpack_w(const T* p, float (&f)[kVectorK]) {
    unpack<T>(p, f);
  }
  __device__ __forceinline__ float scaled(float v, int64_t) const { return v; }
};

template <typename T>
struct Fp8Weights {
  using Element = T;
  using Code = uint8_t;
  static constexpr int kVectorK = 16;
  // 2^fp8_widen_exponent(5, encoding), the power of two unpack_w's fp16 values are short of.
  static constexpr float kFmaUnit =
      static_cast<float>(1u << fp8_widen_exponent(5, kSmallMFp8Encoding));

  const float* scale;  // [n] when per_channel, else [1]
  bool per_channel;

#if defined(TESSERA_CUDA)
  __device__ __forceinline__ static void pair_x(uint4 (&b)[2][2]) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        pair_as_widened(b[v][nt].x, b[v][nt].y);
        pair_as_widened(b[v][nt].z, b[v][nt].w);
      }
    }
  }
  __device__ __forceinline__ static void mma(float (&acc)[2][4], const uint4& a_g,
                                             const uint4& a_g8, const uint4 (&b)[2][2],
                                             bool two_token_tiles) {
    mma_fp8_chunk<T>(acc, a_g, a_g8, b, two_token_tiles);
  }
#endif
  __device__ __forceinline__ static void unpack_w(const uint8_t* p, float (&f)[kVectorK]) {
    using H = gpu::Element<gpu_f16>;  // (this struct's Element hides the template)
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const Fp8WidePairs h = fp8_widen_e4m3x4<5>(q[i]);
      f[4 * i] = H::lo(h.even), f[4 * i + 1] = H::lo(h.odd);
      f[4 * i + 2] = H::hi(h.even), f[4 * i + 3] = H::hi(h.odd);
    }
  }
  __device__ __forceinline__ float scaled(float v, int64_t row) const {
    return v * scale[per_channel ? row : 0];
  }
};

#if defined(TESSERA_CUDA)

// Partial sums of a CTA's kRows rows, one set per warp, then their sum, scaled by the format,
// stored: the epilogue of the mma and line kernels. acc[r] is the fragment of row tile r.
template <typename P, int kRowTiles>
__device__ __forceinline__ void store_rows(
    float (&partial_sums)[kWarps][kSmallMMaxTokens][16 * kRowTiles],
    const float (&acc)[kRowTiles][2][4], int64_t row0, const P& weights, void* out, bool out_f32,
    float* partial, int32_t m, int32_t n) {
  constexpr int kRows = 16 * kRowTiles;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
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
    const int64_t i_out = tok * static_cast<int64_t>(n) + row;
    store_result<typename P::Element>(out, out_f32, partial, mn, i_out, weights.scaled(sum, row));
  }
}

// kRowTiles 16-row tiles of w per CTA (every warp works on all of them, over its share of k);
// kUnroll 16-byte vectors of each row in flight per lane (each a chunk of 4 * P::kVectorK k per
// lane group: 32, or 64 with FP8 weights); kBlocksPerSm CTAs resident per SM at least (the
// register cap follows). More rows per CTA re-read x (through L1/L2) less often per byte of w,
// which counts at m > 8, where x is as wide as a 16-row tile of w -- twice as wide as one of FP8 w.
template <typename P, int kRowTiles, int kUnroll, int kBlocksPerSm = kMinBlocks>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    smallm_mma_kernel(const typename P::Element* __restrict__ x,
                      const typename P::Code* __restrict__ w, P weights, void* __restrict__ out,
                      bool out_f32, float* __restrict__ partial, int32_t m, int32_t n, int32_t k,
                      int32_t k_per_split) {
  using T = typename P::Element;
  constexpr int kRows = 16 * kRowTiles;
  constexpr int kVectorK = P::kVectorK;
  constexpr int kXVectors = kVectorK / 8;  // x's 16-byte vectors per token per w vector
  constexpr int kChunk = 4 * kVectorK;     // k of a lane group's vectors of a row
  constexpr int kStep = kWarps * kChunk;   // k the CTA's warps cover per chunk
  // Each warp's partial sums, token-major so that the final pass reads and writes rows in order.
  __shared__ float partial_sums[kWarps][kSmallMMaxTokens][kRows];

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int32_t k_begin = static_cast<int32_t>(blockIdx.y) * k_per_split;
  const int32_t k_end = min(k, k_begin + k_per_split);
  const bool two_token_tiles = m > 8;

  const typename P::Code* w_row[kRowTiles][2];
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
  const T* x_row[2] = {x + static_cast<int64_t>(min(g, m - 1)) * k,
                       x + static_cast<int64_t>(min(g + 8, m - 1)) * k};
  const bool x_ok[2] = {g < m, two_token_tiles && g + 8 < m};

  // The weights are constant: the warp's first chunks go to L2 while the kernel that wrote x ends
  // (one lane of each four asks: their 16-byte pieces share a 64-byte span of the row).
  if (t == 0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t kk = k_begin + warp * kChunk + u * kStep;
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (kk < k_end && w_ok[r][h]) sm80::prefetch_l2(w_row[r][h] + kk);
        }
      }
    }
  }
  wait_for_prior_kernels();
  let_next_kernel_start();

  float acc[kRowTiles][2][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // The loop bound is the same for every lane of the warp (mma.sync needs the whole warp).
  for (int32_t base = k_begin + warp * kChunk; base < k_end; base += kStep * kUnroll) {
    uint4 a[kUnroll][kRowTiles][2], b[kUnroll][kXVectors][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t kk = base + u * kStep + t * kVectorK;
      const bool in = kk < k_end;
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
#pragma unroll
        for (int h = 0; h < 2; ++h) a[u][r][h] = in && w_ok[r][h] ? sm80::load_once(w_row[r][h] + kk) : zero;
      }
#pragma unroll
      for (int v = 0; v < kXVectors; ++v) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          b[u][v][nt] = in && x_ok[nt]
                            ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + kk + 8 * v))
                            : zero;
        }
      }
      P::pair_x(b[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r) {
        P::mma(acc[r], a[u][r][0], a[u][r][1], b[u], two_token_tiles);
      }
    }
  }

  store_rows<P, kRowTiles>(partial_sums, acc, row0, weights, out, out_f32, partial, m, n);
}

// Swaps the roles of lane bit kLaneBit and register bit kRegBit over v[8]: the element of lane
// bit value a in register bit value b moves to lane bit b, register bit a (one butterfly stage of
// a transpose between lanes and registers: 16 shuffles).
template <int kLaneBit, int kRegBit>
__device__ __forceinline__ void exchange(uint4 (&v)[8], int lane) {
  const bool upper = (lane >> kLaneBit) & 1;
#pragma unroll
  for (int lo = 0; lo < 8; ++lo) {
    if (lo & (1 << kRegBit)) continue;
    constexpr int kStride = 1 << kRegBit;
    const int hi = lo + kStride;
    const uint4 send = upper ? v[lo] : v[hi];
    uint4 got;
    got.x = shfl_xor(send.x, 1 << kLaneBit);
    got.y = shfl_xor(send.y, 1 << kLaneBit);
    got.z = shfl_xor(send.z, 1 << kLaneBit);
    got.w = shfl_xor(send.w, 1 << kLaneBit);
    if (upper) {
      v[lo] = got;
    } else {
      v[hi] = got;
    }
  }
}

// One 16-row tile of w per CTA, as smallm_mma_kernel<T, 1, 4>, with whole-line loads. A warp step
// covers the tile's 16 rows x 128 columns (the CTA's 8 warps take consecutive steps, so a CTA
// iteration covers 1024 columns as the mma kernel's does): load j of lane l reads 16 bytes of row
// 2j + l.bit2 at column 32 * l.bits3-4 + 8 * l.bits0-1 -- 2 rows x 256 contiguous bytes per
// instruction. Lane bits 0-1 already are the fragment's t and bit 2 is g's low bit; exchanging
// lane bits 3, 4 with register bits 0, 1 leaves lane (g, t) holding rows g + 8h at column
// 32c + 8t in v[c + 4h], the fragments of the step's four 32-wide chunks.
// Each step's loads wait for the previous step's exchanges and MMAs (no registers are left for a
// second step in flight at two CTAs per SM). On an H100 that made the kernel 1.65 us slower than
// its loads alone on o (k = 4096: 4 steps per warp; the mma kernel: 0.4 us), which the faster
// stream earns back on long rows and many rows (gate_up, down, lm_head) but not on qkv and o.
template <typename T>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    smallm_line_kernel(const T* __restrict__ x, const T* __restrict__ w, PlainWeights<T> weights,
                       void* __restrict__ out, bool out_f32, float* __restrict__ partial, int32_t m,
                       int32_t n, int32_t k, int32_t k_per_split) {
  constexpr int kStepK = 128;
  constexpr int kIterationK = kStepK * kWarps;
  __shared__ float partial_sums[kWarps][kSmallMMaxTokens][16];

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int32_t k_begin = static_cast<int32_t>(blockIdx.y) * k_per_split;
  const int32_t k_end = min(k, k_begin + k_per_split);
  const bool two_token_tiles = m > 8;

  // This lane's loads: rows 2j + (lane bit 2), column offset 32 * (lane bits 3-4) + 8t.
  const int32_t load_col = 32 * (lane >> 3) + 8 * t;
  const T* w_row[8];
  bool w_ok[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t row = row0 + 2 * j + ((lane >> 2) & 1);
    w_ok[j] = row < n;
    w_row[j] = w + (w_ok[j] ? row : 0) * k + load_col;
  }
  const T* x_row[2] = {x + static_cast<int64_t>(min(g, m - 1)) * k,
                       x + static_cast<int64_t>(min(g + 8, m - 1)) * k};
  const bool x_ok[2] = {g < m, two_token_tiles && g + 8 < m};

  // The weights are constant: the warp's first step goes to L2 while the kernel that wrote x ends.
  if (const int32_t kb = k_begin + warp * kStepK; kb + load_col < k_end) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (w_ok[j]) sm80::prefetch_l2(w_row[j] + kb);
    }
  }
  wait_for_prior_kernels();
  let_next_kernel_start();

  float acc[1][2][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const int32_t iterations = k_end > k_begin ? (k_end - k_begin + kIterationK - 1) / kIterationK : 0;
  for (int32_t it = 0; it < iterations; ++it) {
    const int32_t kb = k_begin + it * kIterationK + warp * kStepK;
    if (kb >= k_end) continue;  // the whole warp: the shuffles and MMAs below need every lane
    uint4 v[8], b[4][2];
    const bool w_in = kb + load_col < k_end;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = w_in && w_ok[j] ? sm80::load_once(w_row[j] + kb) : zero;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int32_t kk = kb + 32 * c + 8 * t;
      const bool in = kk < k_end;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        b[c][nt] = in && x_ok[nt] ? __ldg(reinterpret_cast<const uint4*>(x_row[nt] + kk)) : zero;
      }
    }
    exchange<3, 0>(v, lane);
    exchange<4, 1>(v, lane);
#pragma unroll
    for (int c = 0; c < 4; ++c) mma_chunk<T>(acc[0], v[c], v[c + 4], b[c], two_token_tiles);
  }
  store_rows<PlainWeights<T>, 1>(partial_sums, acc, row0, weights, out, out_f32, partial, m, n);
}

#endif  // TESSERA_CUDA

constexpr int kFmaRows = 2;  // rows of w per warp

// Each lane takes one 16-byte vector of each of the warp's rows per step (8 k, 16 with FP8
// weights) and the same k of every token.
template <typename P>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    smallm_fma_kernel(const typename P::Element* __restrict__ x,
                      const typename P::Code* __restrict__ w, P weights, void* __restrict__ out,
                      bool out_f32, float* __restrict__ partial, int32_t m, int32_t n, int32_t k,
                      int32_t k_per_split) {
  using T = typename P::Element;
  constexpr int kVectorK = P::kVectorK;
  wait_for_prior_kernels();
  let_next_kernel_start();
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kFmaRows;
  if (row0 >= n) return;  // the whole warp: no shuffle below is left waiting
  const int32_t k_begin = static_cast<int32_t>(blockIdx.y) * k_per_split;
  const int32_t k_end = min(k, k_begin + k_per_split);

  float acc[kFmaRows][kSmallMMaxTokens] = {};
  for (int32_t kk = k_begin + lane * kVectorK; kk < k_end; kk += kWarpSize * kVectorK) {
    float wf[kFmaRows][kVectorK];
#pragma unroll
    for (int r = 0; r < kFmaRows; ++r) {
      const int64_t row = row0 + r < n ? row0 + r : row0;
      P::unpack_w(w + row * k + kk, wf[r]);
    }
    // Guarded rather than cut short with break, so that both compilers unroll the loop and
    // acc stays in registers.
#pragma unroll
    for (int tok = 0; tok < kSmallMMaxTokens; ++tok) {
      if (tok < m) {
        float xf[kVectorK];
        unpack<T>(x + static_cast<int64_t>(tok) * k + kk, xf);
#pragma unroll
        for (int r = 0; r < kFmaRows; ++r) {
#pragma unroll
          for (int j = 0; j < kVectorK; ++j) acc[r][tok] += wf[r][j] * xf[j];
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
          store_result<T>(out, out_f32, partial, mn, tok * static_cast<int64_t>(n) + row0 + r,
                          weights.scaled(P::kFmaUnit * v, row0 + r));
        }
      }
    }
  }
}

// out[i] = sum over splits of partial[s, i], i over [m, n].
template <typename T>
__global__ void smallm_reduce_kernel(const float* __restrict__ partial, int splits, int64_t mn,
                                     void* __restrict__ out, bool out_f32) {
  wait_for_prior_kernels();
  let_next_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < mn;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partial[s * mn + i];
    store<T>(out, out_f32, i, sum);
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The launches of smallm_linear and smallm_linear_fp8 (arguments checked by them): `kernel` over
// the weight format P, then the split-K sum.
template <typename P>
gpuError_t launch_smallm(SmallMKernel kernel, int splits, const typename P::Element* x,
                         const typename P::Code* w, P weights, void* out, bool out_f32, int64_t m,
                         int64_t n, int64_t k, float* workspace, gpuStream_t stream) {
  using T = typename P::Element;
  const int64_t k_per_split = ceil_div(ceil_div(k, splits), kSplitAlign) * kSplitAlign;
  const int32_t mi = static_cast<int32_t>(m), ni = static_cast<int32_t>(n),
                ki = static_cast<int32_t>(k), kps = static_cast<int32_t>(k_per_split);
  const dim3 block(kThreads);
  // Every kernel takes the same arguments; rows_per_cta sets the grid.
  const auto run = [&](auto* kernel_fn, int64_t rows_per_cta) {
    const dim3 grid(static_cast<unsigned>(ceil_div(n, rows_per_cta)),
                    static_cast<unsigned>(splits));
    return launch(kernel_fn, grid, block, 0, stream, x, w, weights, out, out_f32, workspace, mi, ni,
                  ki, kps);
  };
#if defined(TESSERA_CUDA)
  // With FP8 weights each vector of w meets two of x per token, in registers until its MMAs: the
  // 32-row kernel spilled 24 bytes at four vectors in flight, the 64-row one 16 at two (CUDA 13.0,
  // sm_90a); at three and one they fit in their 128 registers (the 64-row kernel then has as many
  // bytes of w in flight as the 16-row one at four).
  constexpr bool kFp8 = !std::is_same_v<P, PlainWeights<T>>;
  constexpr int kRows32Unroll = kFp8 ? 3 : 4, kRows64Unroll = kFp8 ? 1 : 2;
#endif
  gpuError_t err = gpuErrorInvalidValue;
  switch (kernel) {
#if defined(TESSERA_CUDA)
    case SmallMKernel::kMmaRows16:
      err = run(smallm_mma_kernel<P, 1, 4>, 16);
      break;
    case SmallMKernel::kMmaRows16ThreePerSm:
      err = run(smallm_mma_kernel<P, 1, 2, 3>, 16);
      break;
    case SmallMKernel::kMmaRows32:
      err = run(smallm_mma_kernel<P, 2, kRows32Unroll>, 32);
      break;
    case SmallMKernel::kMmaRows64:
      err = run(smallm_mma_kernel<P, 4, kRows64Unroll>, 64);
      break;
    case SmallMKernel::kLineRows16:
      // 16-bit weights only (the FP8 entry point refuses it before this).
      if constexpr (std::is_same_v<P, PlainWeights<T>>) err = run(smallm_line_kernel<T>, 16);
      break;
#endif
    case SmallMKernel::kFma:
      err = run(smallm_fma_kernel<P>, kWarps * kFmaRows);
      break;
    default:
      return gpuErrorInvalidValue;
  }
  if (splits == 1 || err != gpuSuccess) return err;
  const int64_t mn = m * n;
  return launch(smallm_reduce_kernel<T>,
                dim3(static_cast<unsigned>(std::min<int64_t>(ceil_div(mn, kThreads), 1024))), block,
                0, stream, workspace, splits, mn, out, out_f32);
}

bool splits_ok(int splits, const float* workspace) {
  return splits >= 1 && splits <= kMaxSplits && (splits == 1 || workspace != nullptr);
}

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

bool smallm_fp8_kernel_available(SmallMKernel kernel) {
  return smallm_kernel_available(kernel) && kernel != SmallMKernel::kLineRows16;
}

bool smallm_fp8_shape_supported(int64_t m, int64_t n, int64_t k) {
  return smallm_shape_supported(m, n, k) && k % 16 == 0;
}

template <typename T>
gpuError_t smallm_linear(SmallMKernel kernel, int splits, const T* x, const T* w, void* out,
                         bool out_f32, int64_t m, int64_t n, int64_t k, float* workspace,
                         gpuStream_t stream) {
  if (!smallm_shape_supported(m, n, k) || !smallm_kernel_available(kernel) ||
      !splits_ok(splits, workspace)) {
    return gpuErrorInvalidValue;
  }
  return launch_smallm(kernel, splits, x, w, PlainWeights<T>{}, out, out_f32, m, n, k, workspace,
                       stream);
}

template <typename T>
gpuError_t smallm_linear_fp8(SmallMKernel kernel, int splits, const T* x, const uint8_t* w,
                             const float* w_scale, bool w_scale_per_channel, void* out,
                             bool out_f32, int64_t m, int64_t n, int64_t k, float* workspace,
                             gpuStream_t stream) {
  if (!smallm_fp8_shape_supported(m, n, k) || !smallm_fp8_kernel_available(kernel) ||
      !splits_ok(splits, workspace) || w_scale == nullptr) {
    return gpuErrorInvalidValue;
  }
  return launch_smallm(kernel, splits, x, w, Fp8Weights<T>{w_scale, w_scale_per_channel}, out,
                       out_f32, m, n, k, workspace, stream);
}

#define TESSERA_SMALLM_LAUNCHERS(T)                                                              \
  template gpuError_t smallm_linear(SmallMKernel, int, const T*, const T*, void*, bool, int64_t, \
                                    int64_t, int64_t, float*, gpuStream_t);                      \
  template gpuError_t smallm_linear_fp8(SmallMKernel, int, const T*, const uint8_t*,             \
                                        const float*, bool, void*, bool, int64_t, int64_t,       \
                                        int64_t, float*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_SMALLM_LAUNCHERS)
#undef TESSERA_SMALLM_LAUNCHERS

}  // namespace tessera::gpu
