// Decode attention over the paged cache, flash-decoding style: each sequence's keys are cut into
// splits; one CTA per (split, KV head, decode sequence) loads each key and value of its split
// once for all the query heads that share that KV head (GQA grouping), with an online softmax per
// head; a combine kernel merges the splits' (max, sum, accumulator) triples. When one split
// covers every sequence, the CTA writes the output itself and no combine runs. A split that
// starts past its sequence's keys writes (max -inf, sum 0), which the combine skips, so a plan
// made for a longer context than a sequence's own stays correct. Gemma 2's logit soft-cap applies
// to each score before the softmax; with a sliding window the splits cut only the sequence's last
// `window` keys (the keys before them are never read).
//
// The cache holds T (the element type) or FP8 e4m3 codes with a scale per layer for K and one for
// V. Codes are widened exactly (kernels/gemm/fp8_widen.h; every e4m3 value is a bf16 / fp16
// value); k_scale is folded into the scores' scale (and the soft-cap's, which takes the true
// score), v_scale into the accumulators before they are written (partials too: the combine is
// linear in them), so the rest of the math is the 16-bit cache's.
//
// CUDA: tensor cores. 4 warps; tiles of 64 keys (16 per warp) are gathered from the pages into
// swizzled shared memory by cp.async, kStages tiles in flight per CTA; S = Q K^T and O += P V
// are m16n8k16 MMAs of the element type with the group's query heads as the A rows (rows past the group are
// zero), fp32 accumulation, online softmax per warp in registers, the warps merged at the end.
// An FP8 tile is staged as codes (half the bytes), and each warp widens its own 16 keys of it
// into one K and one V tile of T in the same swizzled layout, which the MMA code reads unchanged.
// HIP: the SIMT kernel (the MFMA version is not written yet): lanes work in groups of
// head_dim / 8, one key per group at a time, 16-byte loads (8 bytes of FP8 codes), four keys in
// flight per group; written with kWarpSize and group-local shuffles only, for 64-lane CDNA
// wavefronts.
#define TESSERA_GPU_KERNELS_ONLY
#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "kernels/attention_math.h"
#include "kernels/gemm/fp8_widen.h"
#include "kernels/gpu_ops.h"
#include "kernels/launch.h"
#include "kernels/mma_sm80.h"

namespace tessera::gpu {

namespace {

// Keys per pipeline tile (CUDA) and the granule of a split's key range.
constexpr int kTileKeys = 64;
// The smallest split worth a CTA: one tile for the tensor-core kernel (CUDA); for the SIMT
// kernel (HIP), whose CTAs hold fewer keys in flight, 256 keys.
#if defined(TESSERA_CUDA)
constexpr int kMinSplitKeys = 64;
#else
constexpr int kMinSplitKeys = 256;
#endif

// The cache's dequantization: value = element * scale; an FP8 cache's codes also name their
// encoding. A 16-bit cache's: {1, 1}.
struct KvScales {
  float k = 1.0f;
  float v = 1.0f;
  Fp8Encoding encoding = Fp8Encoding::kE4M3FN;
};

// Whether the cache's elements C are FP8 codes (else T itself).
template <typename C>
constexpr bool kFp8Cache = std::is_same_v<C, uint8_t>;

// Output of one CTA's merged (max, sum, acc) for head h: the final row (of T) when the split is
// the only one, else the split's partial.
template <typename T>
__device__ __forceinline__ void write_result(int64_t tok, int dseq, int h, int d, int split,
                                             int num_splits, int num_heads, int D, float mx,
                                             float sum, float a, float* __restrict__ part_acc,
                                             float* __restrict__ part_ml,
                                             T* __restrict__ out) {
  if (num_splits == 1) {
    out[tok * num_heads * D + static_cast<int64_t>(h) * D + d] = from_float<T>(a / sum);
  } else {
    const int64_t part = (static_cast<int64_t>(dseq) * num_heads + h) * num_splits + split;
    part_acc[part * D + d] = a;
    if (d == 0) {
      part_ml[2 * part] = mx;
      part_ml[2 * part + 1] = sum;
    }
  }
}

#if defined(TESSERA_CUDA)

constexpr int kMmaWarps = kTileKeys / 16;
constexpr int kMmaThreads = kMmaWarps * kWarpSize;
// Tiles in shared memory per CTA: 96 KiB at head_dim 128, two CTAs per multiprocessor, two tiles
// in flight while one is computed (2 stages and 3 CTAs, or 4 stages and 1, measured slower). At
// head_dim 256 two stages (128 KiB, one CTA per multiprocessor): a tile there is 64 KiB of K and
// V, one in flight per multiprocessor is already ~8 MB in flight over the GPU.
template <int D>
constexpr int kDecodeStages = D > 128 ? 2 : 3;

// Shared memory of decode_mma_kernel<T, C, D>, in its order: the K and V tiles of T (the stages;
// with FP8 codes the one tile pair they are widened into), at d = 256 the group's query rows
// (padded), then with FP8 the codes' K and V stages. FP8: 40, 80 and 132 KiB at d = 64, 128 and
// 256; 16-bit: 48, 96 and 132 KiB.
template <typename T, typename C, int D>
constexpr int kDecodeSmem = static_cast<int>(
    (2 * (kFp8Cache<C> ? 1 : kDecodeStages<D>) * kTileKeys * D +
     (D > 128 ? kMaxDecodeGroup * (D + 8) : 0)) * sizeof(T) +
    (kFp8Cache<C> ? 2 * kDecodeStages<D> * kTileKeys * D : 0));

// What makes an FP8 cache's widened codes values (a 16-bit cache's kernels ignore it): the power
// of two fp8_widen_e4m3x4's pairs are short of, as a pair of T (fp8_widen_unit_bits), and
// v_scale (k_scale is in the scores' scale).
struct Fp8Values {
  uint32_t unit_bits = 0;
  float v_scale = 1.0f;
};

// Eight FP8 codes (as loaded) as eight T holding their values, in memory order (16 bytes). Each
// word's bytes go to positions 0 2 1 3 first, so that fp8_widen_e4m3x4's pairs (0, 2) and (1, 3)
// come out as (0, 1) and (2, 3); then the power of two is multiplied in (fp8_widen.h).
template <typename T>
__device__ __forceinline__ uint4 widen_codes(uint2 codes, uint32_t unit_bits) {
  constexpr int kBits = kFp8WideExpBits<T>;
  const Fp8WidePairs lo = fp8_widen_e4m3x4<kBits>(__byte_perm(codes.x, 0u, 0x3120));
  const Fp8WidePairs hi = fp8_widen_e4m3x4<kBits>(__byte_perm(codes.y, 0u, 0x3120));
  return make_uint4(fp8_widened_times_unit<kBits>(lo.even, unit_bits),
                    fp8_widened_times_unit<kBits>(lo.odd, unit_bits),
                    fp8_widened_times_unit<kBits>(hi.even, unit_bits),
                    fp8_widened_times_unit<kBits>(hi.odd, unit_bits));
}

// C: the cache's element, T or uint8_t (FP8 codes). Each warp reads only its own 16 keys of a
// tile, so with FP8 each warp also copies and widens only those rows, every lane the chunks it
// copied itself (its own cp.async wait covers them): the warp's T rows then need __syncwarp
// only, and the FP8 loop has no CTA barrier.
template <typename T, typename C, int D>
__global__ void __launch_bounds__(kMmaThreads)
    decode_mma_kernel(const T* __restrict__ qkv, const C* __restrict__ k_cache,
                      const C* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                      int32_t num_heads, int32_t num_kv_heads, float scale_log2,
                      SoftCapArgs cap, int32_t window, int32_t keys_per_split,
                      float* __restrict__ part_acc, float* __restrict__ part_ml,
                      T* __restrict__ out, Fp8Values fp8) {
  constexpr bool kFp8 = kFp8Cache<C>;
  constexpr int kStages = kDecodeStages<D>;
  constexpr int kChunks = D * static_cast<int>(sizeof(C)) / 16;  // 16-byte chunks per key row
  // The threads that copy a tile's keys: the CTA all 64, or with FP8 each warp its own 16.
  constexpr int kCopiers = kFp8 ? kWarpSize : kMmaThreads;
  constexpr int kRowsPerPass = kCopiers / kChunks;  // key rows one pass of the copiers copies
  constexpr int kPasses = (kFp8 ? 16 : kTileKeys) / kRowsPerPass;
  constexpr int kTileElems = kTileKeys * D;
  constexpr int kRowStride = D + 8;  // the epilogue's per-(warp, head) rows, padded
  // Q's A fragments: registers up to d = 128; at d = 256 shared memory (rows padded by 16 bytes:
  // the quad's 8 rows in different banks), read per use, so that S's loop over d unrolls by 4
  // only (unrolled whole with Q in registers, ptxas spilled 112 bytes).
  constexpr bool kQInRegisters = D <= 128;
  constexpr int kSUnroll = kQInRegisters ? D / 16 : 4;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // laid out as kDecodeSmem says
  constexpr int kTTiles = kFp8 ? 1 : kStages;
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + kTTiles * kTileElems;
  T* sQ = sV + kTTiles * kTileElems;  // d = 256: [kMaxDecodeGroup][kRowStride]
  C* cK;  // the stages cp.async fills
  if constexpr (kFp8) {
    cK = reinterpret_cast<C*>(sQ + (kQInRegisters ? 0 : kMaxDecodeGroup * kRowStride));
  } else {
    cK = sK;
  }
  C* cV = cK + kStages * kTileElems;

  const int split = blockIdx.x, num_splits = gridDim.x;
  const int kvh = blockIdx.y;
  const int dseq = blockIdx.z;
  const int seq = step.decode_seqs[dseq];
  const int group = num_heads / num_kv_heads;
  const int n_keys = step.context_len[seq];
  const int k_begin = window_first_key(n_keys - 1, window) + split * keys_per_split;
  const int k_end = min(n_keys, k_begin + keys_per_split);
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int64_t tok = step.query_start[seq];
  // The step's metadata above is no kernel's output: read while the previous kernel (which wrote
  // q and the step's keys) ends (launch.h).
  wait_for_prior_kernels();
  let_next_kernel_start();

  if (k_begin >= k_end) {  // a split past this sequence's keys: a partial the combine skips
    if (tid < group) {
      const int64_t part =
          (static_cast<int64_t>(dseq) * num_heads + kvh * group + tid) * num_splits + split;
      part_ml[2 * part] = -INFINITY;
      part_ml[2 * part + 1] = 0.0f;
    }
    return;
  }
  const int n_tiles = (k_end - k_begin + kTileKeys - 1) / kTileKeys;
  const int64_t kv_row = static_cast<int64_t>(num_kv_heads) * D;
  const int32_t* table = step.block_tables + static_cast<int64_t>(seq) * step.max_blocks;

  // Each copier copies one 16-byte column (lc) of rows lr, lr + kRowsPerPass, ... of K and V.
  // Rows past k_end are zero-filled (FP8: code 0, value 0): their scores are masked and zeros keep
  // P V finite.
  const int copier = kFp8 ? lane : tid;
  const int lc = copier % kChunks, lr = (kFp8 ? warp * 16 : 0) + copier / kChunks;
  const int64_t col = static_cast<int64_t>(kvh) * D + lc * (16 / static_cast<int>(sizeof(C)));
  auto load_tile = [&](int tile, int stage) {
    const int j0 = k_begin + tile * kTileKeys + lr;
    int blk = j0 / block_size, off = j0 % block_size;
    C* dk = cK + stage * kTileElems;
    C* dv = cV + stage * kTileElems;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int r = lr + i * kRowsPerPass;
      const bool ok = j0 + i * kRowsPerPass < k_end;
      int64_t src = 0;
      if (ok) src = (static_cast<int64_t>(table[blk]) * block_size + off) * kv_row + col;
      // 16-bit: the MMA loads' layout; FP8 codes: plain rows, read back only by their copier.
      const int at = kFp8 ? r * D + lc * 16 : sm80::swz<D>(r, lc);
      sm80::cp_async_16(dk + at, k_cache + src, ok ? 16 : 0);
      sm80::cp_async_16(dv + at, v_cache + src, ok ? 16 : 0);
      off += kRowsPerPass;
      while (off >= block_size) {
        off -= block_size;
        ++blk;
      }
    }
  };
  // FP8: this lane's chunks of `stage` widened into the warp's rows of the T tiles, codes 0-7 of
  // a chunk into T chunk 2 lc, 8-15 into 2 lc + 1. The one at (lc / 4) % 2 is stored first, so
  // that the 8 lanes of a 16-byte store's phase hit 8 different bank groups (at d = 64 the rows'
  // swizzle does).
  auto widen_tile = [&](int stage) {
    const int hi_first = (lc >> 2) & 1;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int r = lr + i * kRowsPerPass;
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint4 q = *reinterpret_cast<const uint4*>((kv == 0 ? cK : cV) + stage * kTileElems +
                                                        r * D + lc * 16);
        const uint2 lo = make_uint2(q.x, q.y), hi = make_uint2(q.z, q.w);
        T* dst = kv == 0 ? sK : sV;
        *reinterpret_cast<uint4*>(dst + sm80::swz<D>(r, 2 * lc + hi_first)) =
            widen_codes<T>(hi_first ? hi : lo, fp8.unit_bits);
        *reinterpret_cast<uint4*>(dst + sm80::swz<D>(r, 2 * lc + 1 - hi_first)) =
            widen_codes<T>(hi_first ? lo : hi, fp8.unit_bits);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) load_tile(s, s);
    sm80::cp_async_commit();
  }

  // A operand rows: query head g of the group (rows g + 8 and heads past the group are zero).
  const int g = lane / 4, t = lane % 4, mi = lane / 8;
  const int64_t qkv_stride = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * D;
  uint32_t qf[kQInRegisters ? D / 16 : 1][2];
  if constexpr (kQInRegisters) {
    const T* qrow = qkv + tok * qkv_stride + static_cast<int64_t>(kvh * group + g) * D;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      qf[kk][0] = g < group ? *reinterpret_cast<const uint32_t*>(qrow + kk * 16 + 2 * t) : 0u;
      qf[kk][1] = g < group ? *reinterpret_cast<const uint32_t*>(qrow + kk * 16 + 8 + 2 * t) : 0u;
    }
  } else {
    // The group's rows (zeros past it), published by the first tile's barrier -- with FP8, whose
    // loop has no CTA barrier, by one of their own.
    constexpr int kQChunks = D / 8;
    for (int i = tid; i < kMaxDecodeGroup * kQChunks; i += kMmaThreads) {
      const int r = i / kQChunks, c = i % kQChunks;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r < group) {
        v = *reinterpret_cast<const uint4*>(qkv + tok * qkv_stride +
                                            static_cast<int64_t>(kvh * group + r) * D + c * 8);
      }
      *reinterpret_cast<uint4*>(sQ + r * kRowStride + c * 8) = v;
    }
    if constexpr (kFp8) __syncthreads();
  }

  float o[D / 8][4];
#pragma unroll
  for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // head g over this warp's keys; m in log2 units

  for (int tile = 0; tile < n_tiles; ++tile) {
    sm80::cp_async_wait_pending<kStages - 2>();
    if constexpr (kFp8) {
      __syncwarp();  // every lane is done reading the warp's T rows of tile - 1
    } else {
      __syncthreads();  // the tile landed for every thread; every warp is done with tile - 1
    }
    if (tile + kStages - 1 < n_tiles) load_tile(tile + kStages - 1, (tile + kStages - 1) % kStages);
    sm80::cp_async_commit();
    if constexpr (kFp8) {
      widen_tile(tile % kStages);
      __syncwarp();  // the warp's T rows written, for every lane's loads
    }
    const T* tk = sK + (kFp8 ? 0 : tile % kStages) * kTileElems;
    const T* tv = sV + (kFp8 ? 0 : tile % kStages) * kTileElems;

    // S[g][key] for this warp's 16 keys: s[n] holds keys n * 8 + 2t, +1 (rows g; g + 8 unused).
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll(kSUnroll)
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t b[4];
      sm80::ldmatrix_x4(b, tk + sm80::swz<D>(warp * 16 + (mi / 2) * 8 + lane % 8, kk * 2 + mi % 2));
      uint32_t a[4] = {0u, 0u, 0u, 0u};
      if constexpr (kQInRegisters) {
        a[0] = qf[kk][0];
        a[2] = qf[kk][1];
      } else {
        const T* qr = sQ + g * kRowStride + kk * 16 + 2 * t;
        a[0] = *reinterpret_cast<const uint32_t*>(qr);
        a[2] = *reinterpret_cast<const uint32_t*>(qr + 8);
      }
      sm80::mma_16816<T>(s[0], a, b[0], b[1]);
      sm80::mma_16816<T>(s[1], a, b[2], b[3]);
    }
    const int key0 = k_begin + tile * kTileKeys + warp * 16 + 2 * t;
    float x[4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float score = cap.on ? soft_cap_score(s[n][e], cap) : s[n][e];
        x[2 * n + e] = key0 + n * 8 + e < k_end ? score * scale_log2 : -INFINITY;
      }
    }
    float mx = fmaxf(fmaxf(m, fmaxf(x[0], x[1])), fmaxf(x[2], x[3]));
    mx = fmaxf(mx, shfl_xor(mx, 1));
    mx = fmaxf(mx, shfl_xor(mx, 2));
    // No key of this warp so far: subtract 0 instead (no inf - inf); every p is then 0.
    const float base = mx == -INFINITY ? 0.0f : mx;
    const float alpha = exp2f(m - base);
    m = mx;
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) p[i] = exp2f(x[i] - base);
    l = l * alpha + ((p[0] + p[1]) + (p[2] + p[3]));
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      o[d][0] *= alpha;
      o[d][1] *= alpha;
    }
    const uint32_t a[4] = {Element<T>::pack(p[0], p[1]), 0u, Element<T>::pack(p[2], p[3]), 0u};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      sm80::ldmatrix_x4_trans(
          b, tv + sm80::swz<D>(warp * 16 + (mi % 2) * 8 + lane % 8, dp * 2 + mi / 2));
      sm80::mma_16816<T>(o[2 * dp], a, b[0], b[1]);
      sm80::mma_16816<T>(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
  sm80::cp_async_wait_pending<0>();
  l += shfl_xor(l, 1);
  l += shfl_xor(l, 2);
  __syncthreads();  // the tiles' shared memory becomes the warps' (m, l, o)

  float* s_m = reinterpret_cast<float*>(smem_raw);  // [warp][head]
  float* s_l = s_m + kMmaWarps * kMaxDecodeGroup;
  float* s_o = s_l + kMmaWarps * kMaxDecodeGroup;   // [warp][head][kRowStride]
  if (g < group) {
    const int row = warp * kMaxDecodeGroup + g;
    if (t == 0) {
      s_m[row] = m;
      s_l[row] = l;
    }
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
      *reinterpret_cast<float2*>(s_o + row * kRowStride + d * 8 + 2 * t) = make_float2(o[d][0], o[d][1]);
    }
  }
  __syncthreads();

  for (int idx = tid; idx < group * D; idx += kMmaThreads) {
    const int hg = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) mx = fmaxf(mx, s_m[w * kMaxDecodeGroup + hg]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) {
      const int row = w * kMaxDecodeGroup + hg;
      if (s_m[row] == -INFINITY) continue;
      const float wt = exp2f(s_m[row] - mx);
      sum += s_l[row] * wt;
      acc += s_o[row * kRowStride + d] * wt;
    }
    if constexpr (kFp8) acc *= fp8.v_scale;
    write_result(tok, dseq, kvh * group + hg, d, split, num_splits, num_heads, D, mx, sum, acc,
                 part_acc, part_ml, out);
  }
}

#else  // HIP

constexpr int kThreads = 128;
constexpr int kUnroll = 4;  // keys in flight per lane group

// Eight consecutive elements as floats: 16 bytes of T, or (the uint2 overload, whatever T) 8 FP8
// codes widened through fp16 -- exact for every e4m3 code, subnormals included (fp16 holds them
// as its own subnormals, and fp16 -> fp32 is exact) -- short of the power of two the launcher
// folds into the scales.
template <typename T>
__device__ __forceinline__ void to_floats(const uint4& raw, float (&f)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[2 * e] = Element<T>::lo(w[e]);
    f[2 * e + 1] = Element<T>::hi(w[e]);
  }
}
template <typename T>
__device__ __forceinline__ void to_floats(const uint2& raw, float (&f)[8]) {
  const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const Fp8WidePairs p = fp8_widen_e4m3x4<5>(w[e]);  // codes (0, 2) and (1, 3)
    f[4 * e] = Element<gpu_f16>::lo(p.even);
    f[4 * e + 1] = Element<gpu_f16>::lo(p.odd);
    f[4 * e + 2] = Element<gpu_f16>::hi(p.even);
    f[4 * e + 3] = Element<gpu_f16>::hi(p.odd);
  }
}

// C: the cache's element, T or uint8_t (FP8 codes); v_scale multiplies the outputs (FP8 only).
template <typename T, typename C, int D, int kMaxGroup>
__global__ void __launch_bounds__(kThreads)
    decode_kernel(const T* __restrict__ qkv, const C* __restrict__ k_cache,
                  const C* __restrict__ v_cache, int32_t block_size, DeviceStep step,
                  int32_t num_heads, int32_t num_kv_heads, float scale_log2, SoftCapArgs cap,
                  int32_t window, int32_t keys_per_split, float* __restrict__ part_acc,
                  float* __restrict__ part_ml, T* __restrict__ out, float v_scale) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  // A lane's 8 elements of a key: 16 bytes of T, or 8 bytes of FP8 codes.
  using Raw = std::conditional_t<kFp8Cache<C>, uint2, uint4>;
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
  const int n_keys = step.context_len[seq];
  const int k_begin = window_first_key(n_keys - 1, window) + split * keys_per_split;
  const int k_end = min(n_keys, k_begin + keys_per_split);
  const int grp = threadIdx.x / kLanes, gl = threadIdx.x % kLanes;
  const float inv_scale_log2 = 1.0f / scale_log2;  // q is pre-scaled; the cap takes raw scores
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
    to_floats<T>(raw, q[g]);
#pragma unroll
    for (int e = 0; e < 8; ++e) q[g][e] *= scale_log2;
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
    Raw kr[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u * kGroups;
      kr[u] = vr[u] = Raw{};
      if (j < k_end) {
        const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
        const int64_t off = slot * kv_row + static_cast<int64_t>(kvh) * D + gl * 8;
        kr[u] = *reinterpret_cast<const Raw*>(k_cache + off);
        vr[u] = *reinterpret_cast<const Raw*>(v_cache + off);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool valid = j0 + u * kGroups < k_end;
      float kf[8], vf[8];
      to_floats<T>(kr[u], kf);
      to_floats<T>(vr[u], vf);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot += q[g][e] * kf[e];
        // Every lane shuffles (no divergence around the shuffles); groups are aligned runs.
#pragma unroll
        for (int s = kLanes / 2; s > 0; s >>= 1) dot += shfl_xor(dot, s);
        if (cap.on) dot = soft_cap_score(dot * inv_scale_log2, cap) * scale_log2;
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
    if constexpr (kFp8Cache<C>) a *= v_scale;
    write_result(tok, dseq, kvh * group + g, d, split, num_splits, num_heads, D, mx, sum, a,
                 part_acc, part_ml, out);
  }
}

#endif  // TESSERA_CUDA

// grid (num_decode_seqs, num_heads), kCombineThreads threads. Every split's (max, sum) is read at
// once (one split per thread) and its weight exp2(m_s - max) goes to shared memory; the
// accumulators are then read as float4, kCombineThreads / (D / 4) splits side by side with
// several loads in flight per thread, and summed over those rows in shared memory. Splits with
// max -inf (no keys) are skipped, their accumulators never read.
constexpr int kCombineThreads = 128;
static_assert(kMaxDecodeSplits <= kCombineThreads, "one split per combine thread");

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* s_red) {
  for (int s = kWarpSize / 2; s > 0; s >>= 1) {
    const float o = shfl_xor(v, s);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  constexpr int kWarps = (kCombineThreads + kWarpSize - 1) / kWarpSize;
  __syncthreads();  // s_red may still be read by an earlier reduction
  if (threadIdx.x % kWarpSize == 0) s_red[threadIdx.x / kWarpSize] = v;
  __syncthreads();
  v = s_red[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = is_max ? fmaxf(v, s_red[w]) : v + s_red[w];
  return v;
}

template <typename T, int D>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                   DeviceStep step, int32_t num_heads, int32_t num_splits, T* __restrict__ out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  constexpr int kCols = D / 4;                    // threads per accumulator row, 4 dims each
  constexpr int kRows = kCombineThreads / kCols;  // splits summed side by side
  __shared__ float s_w[kCombineThreads];
  __shared__ float s_red[(kCombineThreads + kWarpSize - 1) / kWarpSize];
  __shared__ float4 s_acc[kRows][kCols];
  const int dseq = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int64_t tok = step.query_start[step.decode_seqs[dseq]];
  const int64_t base = (static_cast<int64_t>(dseq) * num_heads + h) * num_splits;
  float ms = -INFINITY, ls = 0.0f;
  if (tid < num_splits) {
    ms = part_ml[2 * (base + tid)];
    ls = part_ml[2 * (base + tid) + 1];
  }
  const float mx = block_reduce(ms, true, s_red);
  const float w = ms == -INFINITY ? 0.0f : exp2f(ms - mx);
  s_w[tid] = w;
  const float sum = block_reduce(w != 0.0f ? ls * w : 0.0f, false, s_red);  // publishes s_w

  const int r = tid / kCols, c = tid % kCols;
  const float4* acc = reinterpret_cast<const float4*>(part_acc + base * D) + c;
  float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  // kBatch splits' accumulators are loaded before any is used: with each load beside its use
  // (under the weight test) the compiler issued them one after another, one L2 round trip each.
  // A split past its keys may hold garbage: it is loaded (inside the workspace) but never added.
  constexpr int kBatch = 8;
  for (int s0 = r; s0 < num_splits; s0 += kBatch * kRows) {
    float4 v[kBatch];
    float ws[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = s0 + i * kRows;
      const bool in = s < num_splits;
      ws[i] = in ? s_w[s] : 0.0f;
      v[i] = in ? acc[static_cast<int64_t>(s) * kCols] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (ws[i] != 0.0f) {
        a.x += v[i].x * ws[i];
        a.y += v[i].y * ws[i];
        a.z += v[i].z * ws[i];
        a.w += v[i].w * ws[i];
      }
    }
  }
  s_acc[r][c] = a;
  __syncthreads();
  if (tid < kCols) {
    float4 t = s_acc[0][tid];
#pragma unroll
    for (int i = 1; i < kRows; ++i) {
      t.x += s_acc[i][tid].x;
      t.y += s_acc[i][tid].y;
      t.z += s_acc[i][tid].z;
      t.w += s_acc[i][tid].w;
    }
    const float inv = 1.0f / sum;
    *reinterpret_cast<uint2*>(out + tok * num_heads * D + static_cast<int64_t>(h) * D + 4 * tid) =
        make_uint2(Element<T>::pack(t.x * inv, t.y * inv), Element<T>::pack(t.z * inv, t.w * inv));
  }
}

#if defined(TESSERA_CUDA)

template <typename T, typename C, int D>
gpuError_t launch_decode(const T* qkv, const C* k_cache, const C* v_cache, const KvScales& kv,
                         int32_t block_size, const DeviceStep& step, int32_t num_heads,
                         int32_t num_kv_heads, float scale, float softcap, int32_t window,
                         const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                         gpuStream_t stream) {
  constexpr int kSmem = kDecodeSmem<T, C, D>;
  static_assert(kSmem >= (2 + (D + 8)) * kMmaWarps * kMaxDecodeGroup * 4,
                "the epilogue reuses the tiles' shared memory");
  if constexpr (kSmem > 48 * 1024) {
    // More than 48 KiB of dynamic shared memory must be allowed once per device.
    static std::atomic<uint64_t> allowed_on{0};  // bit d: done on device d (d < 64)
    int device = 0;
    gpuError_t err = cudaGetDevice(&device);
    if (err != gpuSuccess) return err;
    const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
    if (bit == 0 || (allowed_on.load(std::memory_order_acquire) & bit) == 0) {
      err = cudaFuncSetAttribute(decode_mma_kernel<T, C, D>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      if (err != gpuSuccess) return err;
      allowed_on.fetch_or(bit, std::memory_order_release);
    }
  }
  // k_scale is a factor of every score: of the softmax's scale and the soft-cap's.
  const float score_scale = scale * kv.k;
  const Fp8Values fp8{fp8_widen_unit_bits(kFp8WideExpBits<T>, kv.encoding), kv.v};
  const dim3 grid(splits.num_splits, num_kv_heads, step.num_decode_seqs);
  return launch(decode_mma_kernel<T, C, D>, grid, dim3(kMmaThreads), kSmem, stream, qkv, k_cache,
                v_cache, block_size, step, num_heads, num_kv_heads,
                score_scale * 1.4426950408889634f, make_soft_cap(score_scale, softcap),
                std::max(window, 0), splits.keys_per_split, part_acc, part_ml, out, fp8);
}

#else  // HIP

template <typename T, typename C, int D, int kMaxGroup>
gpuError_t launch_simt(const T* qkv, const C* k_cache, const C* v_cache, const KvScales& kv,
                       int32_t block_size, const DeviceStep& step, int32_t num_heads,
                       int32_t num_kv_heads, float scale, float softcap, int32_t window,
                       const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                       gpuStream_t stream) {
  // k_scale is a factor of every score (of the softmax's scale and the soft-cap's); FP8 codes
  // widen to values short of 2^fp8_widen_exponent(5, encoding) (to_floats), a factor of every
  // score and every output: both scales take it.
  const float widen =
      kFp8Cache<C> ? std::ldexp(1.0f, fp8_widen_exponent(5, kv.encoding)) : 1.0f;
  const float score_scale = scale * kv.k * widen;
  const dim3 grid(splits.num_splits, num_kv_heads, step.num_decode_seqs);
  return launch(decode_kernel<T, C, D, kMaxGroup>, grid, dim3(kThreads), 0, stream, qkv,
                k_cache, v_cache, block_size, step, num_heads, num_kv_heads,
                score_scale * 1.4426950408889634f, make_soft_cap(score_scale, softcap),
                std::max(window, 0), splits.keys_per_split, part_acc, part_ml, out,
                kv.v * widen);
}

template <typename T, typename C, int D>
gpuError_t launch_decode(const T* qkv, const C* k_cache, const C* v_cache, const KvScales& kv,
                         int32_t block_size, const DeviceStep& step, int32_t num_heads,
                         int32_t num_kv_heads, float scale, float softcap, int32_t window,
                         const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                         gpuStream_t stream) {
  const int group = num_heads / num_kv_heads;
  if (group <= 1) {
    return launch_simt<T, C, D, 1>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                   num_kv_heads, scale, softcap, window, splits, part_acc,
                                   part_ml, out, stream);
  }
  if (group <= 2) {
    return launch_simt<T, C, D, 2>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                   num_kv_heads, scale, softcap, window, splits, part_acc,
                                   part_ml, out, stream);
  }
  if (group <= 4) {
    return launch_simt<T, C, D, 4>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                   num_kv_heads, scale, softcap, window, splits, part_acc,
                                   part_ml, out, stream);
  }
  return launch_simt<T, C, D, 8>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                 num_kv_heads, scale, softcap, window, splits, part_acc, part_ml,
                                 out, stream);
}

#endif  // TESSERA_CUDA

template <typename T, typename C, int D>
gpuError_t decode_and_combine(const T* qkv, const C* k_cache, const C* v_cache,
                              const KvScales& kv, int32_t block_size, const DeviceStep& step,
                              int32_t num_heads, int32_t num_kv_heads, float scale, float softcap,
                              int32_t window, const DecodeSplits& splits, float* part_acc,
                              float* part_ml, T* out, gpuStream_t stream) {
  gpuError_t err =
      launch_decode<T, C, D>(qkv, k_cache, v_cache, kv, block_size, step, num_heads, num_kv_heads,
                             scale, softcap, window, splits, part_acc, part_ml, out, stream);
  if (err != gpuSuccess || splits.num_splits == 1) return err;
  const dim3 grid(step.num_decode_seqs, num_heads);
  return launch(combine_kernel<T, D>, grid, dim3(kCombineThreads), 0, stream, part_acc, part_ml,
                step, num_heads, splits.num_splits, out);
}

// attention_decode over either cache: the checks, then the head_dim's kernels.
template <typename T, typename C>
gpuError_t decode_cache(const T* qkv, const C* k_cache, const C* v_cache, const KvScales& kv,
                        int32_t block_size, const DeviceStep& step, int32_t num_heads,
                        int32_t num_kv_heads, int32_t head_dim, float scale, float softcap,
                        int32_t window, const DecodeSplits& splits, float* part_acc,
                        float* part_ml, T* out, gpuStream_t stream) {
  if (step.num_decode_seqs <= 0) return gpuSuccess;
  if (num_kv_heads <= 0 || num_heads % num_kv_heads != 0 || splits.num_splits < 1 ||
      splits.num_splits > kMaxDecodeSplits) {
    return gpuErrorInvalidValue;
  }
  const int group = num_heads / num_kv_heads;
  if (!decode_kernel_supported(head_dim, group)) return gpuErrorInvalidValue;
  switch (head_dim) {
    case 64:
      return decode_and_combine<T, C, 64>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                          num_kv_heads, scale, softcap, window, splits, part_acc,
                                          part_ml, out, stream);
    case 128:
      return decode_and_combine<T, C, 128>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                           num_kv_heads, scale, softcap, window, splits, part_acc,
                                           part_ml, out, stream);
    default:
      return decode_and_combine<T, C, 256>(qkv, k_cache, v_cache, kv, block_size, step, num_heads,
                                           num_kv_heads, scale, softcap, window, splits, part_acc,
                                           part_ml, out, stream);
  }
}

}  // namespace

bool decode_kernel_supported(int32_t head_dim, int32_t group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 &&
         group <= kMaxDecodeGroup;
}

DecodeSplits plan_decode_splits(int32_t num_decode_seqs, int32_t num_kv_heads,
                                int32_t max_context, int32_t multiprocessors) {
  DecodeSplits p;
  if (num_decode_seqs <= 0 || max_context <= 0) return p;
#if defined(TESSERA_CUDA)
  // One wave of the tensor-core kernel's resident CTAs (two per multiprocessor): each CTA keeps
  // two tiles in flight, so one wave already saturates memory, and fewer, longer splits pay
  // the CTA's start (metadata, first tile's latency) and the combine less often. On H100 at
  // batch 1, 8k keys: 32 splits 72% of copy bandwidth; 64 and 128 splits 48% and 36% (measured
  // with the earlier combine kernel).
  const int64_t slots = 2 * static_cast<int64_t>(multiprocessors);
#else
  // Four CTAs of the SIMT kernel per multiprocessor.
  const int64_t slots = 4 * static_cast<int64_t>(multiprocessors);
#endif
  const int64_t min_keys = kMinSplitKeys;
  const int64_t ctas = static_cast<int64_t>(num_decode_seqs) * num_kv_heads;
  const int64_t wanted = (slots + ctas - 1) / ctas;
  const int64_t most = (max_context + min_keys - 1) / min_keys;
  const int64_t splits = std::max<int64_t>(1, std::min({wanted, most, int64_t{kMaxDecodeSplits}}));
  int64_t per = (max_context + splits - 1) / splits;
  per = (per + kTileKeys - 1) / kTileKeys * kTileKeys;
  p.keys_per_split = static_cast<int32_t>(per);
  p.num_splits = static_cast<int32_t>((max_context + per - 1) / per);
  return p;
}

template <typename T>
gpuError_t attention_decode(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                            const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                            int32_t head_dim, float scale, float softcap, int32_t window,
                            const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                            gpuStream_t stream) {
  return decode_cache(qkv, k_cache, v_cache, KvScales{}, block_size, step, num_heads,
                      num_kv_heads, head_dim, scale, softcap, window, splits, part_acc, part_ml,
                      out, stream);
}

template <typename T>
gpuError_t attention_decode(const T* qkv, const Fp8KvPools& pools, int32_t block_size,
                            const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                            int32_t head_dim, float scale, float softcap, int32_t window,
                            const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                            gpuStream_t stream) {
  // fp8_widen.h widens e4m3 codes only.
  if (pools.encoding == Fp8Encoding::kE5M2) return gpuErrorInvalidValue;
  return decode_cache(qkv, pools.k, pools.v, KvScales{pools.k_scale, pools.v_scale, pools.encoding},
                      block_size, step, num_heads, num_kv_heads, head_dim, scale, softcap, window,
                      splits, part_acc, part_ml, out, stream);
}

#define TESSERA_DECODE_LAUNCHER(T)                                                            \
  template gpuError_t attention_decode(const T*, const T*, const T*, int32_t, const DeviceStep&, \
                                       int32_t, int32_t, int32_t, float, float, int32_t,         \
                                       const DecodeSplits&, float*, float*, T*, gpuStream_t);    \
  template gpuError_t attention_decode(const T*, const Fp8KvPools&, int32_t, const DeviceStep&,  \
                                       int32_t, int32_t, int32_t, float, float, int32_t,         \
                                       const DecodeSplits&, float*, float*, T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_DECODE_LAUNCHER)
#undef TESSERA_DECODE_LAUNCHER

}  // namespace tessera::gpu
