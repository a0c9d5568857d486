// Elementwise and row-wise GPU kernels: dtype conversion, embedding (scaled), RMSNorm (plain and
// fused with the residual add, weights with an offset), gated activations (SiLU, GELU-tanh),
// soft-capping, row gather, and a seeded uniform fill (benchmark inputs made on the device).
// 16-bit storage (T: gpu_bf16 or gpu_f16), fp32 arithmetic; the norms and gated activations also
// write their output as row-scaled FP8 codes (the scaled GEMMs' activations).
#define TESSERA_GPU_KERNELS_ONLY
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "kernels/fp8_quantize.h"
#include "kernels/gpu_ops.h"
#include "kernels/launch.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void convert_f32_kernel(const float* src, T* dst, int64_t n,
                                   unsigned long long* first_non_finite, int64_t index_base) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T out = from_float<T>(src[i]);
    dst[i] = out;
    if (first_non_finite != nullptr) {
      note_non_finite(out, static_cast<unsigned long long>(index_base + i), first_non_finite);
    }
  }
}

template <typename T>
__global__ void fill_uniform_kernel(T* dst, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t z = seed + static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    dst[i] = from_float<T>(lo + (hi - lo) * static_cast<float>(z >> 40) * (1.0f / 16777216.0f));
  }
}

template <typename T>
__global__ void embedding_kernel(const T* table, int64_t first_id, int64_t rows, int64_t hidden,
                                 const int32_t* ids, float scale, T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  const int64_t t = blockIdx.x;
  const int64_t id = static_cast<int64_t>(ids[t]) - first_id;
  T* dst = out + t * hidden;
  if (id < 0 || id >= rows) {  // another rank's token, as the CPU does
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = from_float<T>(0.0f);
    return;
  }
  const T* src = table + id * hidden;
  if (scale == 1.0f) {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
  } else {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      dst[i] = from_float<T>(to_float(src[i]) * scale);
    }
  }
}

// Elements of T in a 16-byte vector, and whether rows of `cols` elements at these pointers can be
// walked in such vectors (every row start 16-byte aligned).
constexpr int kVec = 8;
bool vectorizable(int64_t cols, std::initializer_list<const void*> ptrs) {
  if (cols % kVec != 0) return false;
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// Element i (0..7) of a 16-byte vector of T, as fp32.
template <typename T>
__device__ __forceinline__ float lane_of(const uint4& v, int i) {
  const uint32_t pair = (&v.x)[i / 2];
  return (i & 1) ? Element<T>::hi(pair) : Element<T>::lo(pair);
}
// Eight fp32 values rounded to T, packed as in memory.
template <typename T>
__device__ __forceinline__ uint4 pack8(const float (&f)[kVec]) {
  return make_uint4(Element<T>::pack(f[0], f[1]), Element<T>::pack(f[2], f[3]),
                    Element<T>::pack(f[4], f[5]), Element<T>::pack(f[6], f[7]));
}

// Eight values rounded to T and read back as fp32: what a 16-bit output would hold.
template <typename T>
__device__ __forceinline__ void round_to(float (&f)[kVec]) {
  const uint4 stored = pack8<T>(f);
  for (int i = 0; i < kVec; ++i) f[i] = lane_of<T>(stored, i);
}

// The row-wise FP8 output of a 16-bit op (gpu_ops.h Fp8Rows): the row's values, rounded to T, are
// visited twice through `values(visit)` -- which calls visit(index, value) for each of the
// thread's elements, in 8-element runs where kVectors -- once for the row's largest |value|, once
// to encode them at the row's scale. Recomputing is cheaper than keeping the row: its inputs are
// in the L1 / L2 from the first visit.
template <bool kVectors, typename Values>
__device__ __forceinline__ void write_fp8_row(const Fp8Rows& out, int64_t row, int64_t width,
                                              uint32_t* shared, Values values) {
  uint32_t m = 0;
  if constexpr (kVectors) {
    values([&](int64_t, const float (&f)[kVec]) {
      for (int i = 0; i < kVec; ++i) m = max(m, fp8_abs_bits(f[i]));
    });
  } else {
    values([&](int64_t, float v) { m = max(m, fp8_abs_bits(v)); });
  }
  const float scale =
      fp8_scale_for_amax(__uint_as_float(block_reduce(m, shared, 0u, MaxOp{})), out.encoding);
  if (threadIdx.x == 0) out.scales[row] = scale;
  uint8_t* codes = out.codes + row * width;
  if constexpr (kVectors) {
    values([&](int64_t v, const float (&f)[kVec]) {
      uint8_t c[kVec];
      for (int i = 0; i < kVec; ++i) c[i] = fp8_encode_scaled(f[i], scale, out.encoding);
      uint2 packed;
      memcpy(&packed, c, sizeof(packed));
      reinterpret_cast<uint2*>(codes)[v] = packed;
    });
  } else {
    values([&](int64_t i, float v) { codes[i] = fp8_encode_scaled(v, scale, out.encoding); });
  }
}

// One block per row. kVectors: rows walked in 16-byte vectors (vectorizable()), else element by
// element; the arithmetic is the same per element either way (the sum of squares adds in another
// order, so the two paths may differ in the last bit). kFp8: the output is written to `fp8`
// (write_fp8_row), `out` unused.
template <typename T, bool kVectors, bool kFp8>
__global__ void rms_norm_kernel(T* residual, const T* x, const T* w, int64_t hidden, float eps,
                                float weight_offset, T* out, Fp8Rows fp8) {
  // The weights are constant: the thread's first kHeldWeights vectors of w are loaded while the
  // previous kernel ends (launch.h), the rest (hidden > kThreads * kVec * kHeldWeights) later.
  constexpr int kHeldWeights = 4;
  [[maybe_unused]] uint4 held_w[kHeldWeights];
  if constexpr (kVectors) {
#pragma unroll
    for (int j = 0; j < kHeldWeights; ++j) {
      const int64_t v = threadIdx.x + static_cast<int64_t>(j) * kThreads;
      held_w[j] = v < hidden / kVec ? reinterpret_cast<const uint4*>(w)[v] : make_uint4(0, 0, 0, 0);
    }
  }
  wait_for_prior_kernels();
  let_next_kernel_start();
  __shared__ float shared[kThreads / kWarpSize + 1];
  __shared__ uint32_t shared_max[kFp8 ? kThreads / kWarpSize + 1 : 1];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* rr = residual == nullptr ? nullptr : residual + row * hidden;
  const T* src = rr != nullptr ? rr : xr;
  T* o = kFp8 ? nullptr : out + row * hidden;
  // An offset of 0 multiplies by w itself (not 0 + w, which would turn -0 into +0).
  auto weight = [&](float wi) { return weight_offset == 0.0f ? wi : weight_offset + wi; };
  float sum_sq = 0.0f;
  if constexpr (kVectors) {
    const int64_t vecs = hidden / kVec;
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      const uint4 xv = reinterpret_cast<const uint4*>(xr)[v];
      float f[kVec];
      for (int i = 0; i < kVec; ++i) f[i] = lane_of<T>(xv, i);
      if (rr != nullptr) {
        // The residual stream is stored in T: normalize what is stored, as later reads see it.
        const uint4 rv = reinterpret_cast<const uint4*>(rr)[v];
        for (int i = 0; i < kVec; ++i) f[i] += lane_of<T>(rv, i);
        const uint4 stored = pack8<T>(f);
        reinterpret_cast<uint4*>(rr)[v] = stored;
        for (int i = 0; i < kVec; ++i) f[i] = lane_of<T>(stored, i);
      }
      for (int i = 0; i < kVec; ++i) sum_sq += f[i] * f[i];
    }
    const float inv_rms = rsqrtf(block_sum(sum_sq, shared) / static_cast<float>(hidden) + eps);
    // w's vector v, from held_w when this thread loaded it before the wait.
    auto weight_vector = [&](int64_t v) {
      const int64_t j = (v - threadIdx.x) / kThreads;
      uint4 held = held_w[0];
#pragma unroll
      for (int i = 1; i < kHeldWeights; ++i) {
        if (j == i) held = held_w[i];
      }
      return j < kHeldWeights ? held : reinterpret_cast<const uint4*>(w)[v];
    };
    auto normalized = [&](int64_t v, float (&f)[kVec]) {
      const uint4 sv = reinterpret_cast<const uint4*>(src)[v];
      const uint4 wv = weight_vector(v);
      for (int i = 0; i < kVec; ++i) f[i] = lane_of<T>(sv, i) * inv_rms * weight(lane_of<T>(wv, i));
    };
    if constexpr (kFp8) {
      write_fp8_row<true>(fp8, row, hidden, shared_max, [&](auto visit) {
        for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
          float f[kVec];
          normalized(v, f);
          round_to<T>(f);
          visit(v, f);
        }
      });
    } else {
      for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
        float f[kVec];
        normalized(v, f);
        reinterpret_cast<uint4*>(o)[v] = pack8<T>(f);
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      float v = to_float(xr[i]);
      if (rr != nullptr) {
        const T s = from_float<T>(to_float(rr[i]) + v);
        rr[i] = s;
        v = to_float(s);
      }
      sum_sq += v * v;
    }
    const float inv_rms = rsqrtf(block_sum(sum_sq, shared) / static_cast<float>(hidden) + eps);
    auto normalized = [&](int64_t i) {
      return from_float<T>(to_float(src[i]) * inv_rms * weight(to_float(w[i])));
    };
    if constexpr (kFp8) {
      write_fp8_row<false>(fp8, row, hidden, shared_max, [&](auto visit) {
        for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) visit(i, to_float(normalized(i)));
      });
    } else {
      for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = normalized(i);
    }
  }
}

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float gated(float g, float u, bool gelu) {
  return (gelu ? gelu_tanh(g) : g / (1.0f + __expf(-g))) * u;
}

// grid (column blocks, row blocks): rows blockIdx.y, + gridDim.y, ...; kThreads x (8 columns, or
// 1) per block. kVectors: 16-byte vectors of gate, up and out (vectorizable()).
template <typename T, bool kVectors>
__global__ void gated_activation_kernel(const T* gate_up, int64_t n, int64_t inter, bool gelu,
                                        T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= (kVectors ? inter / kVec : inter)) return;
  for (int64_t t = blockIdx.y; t < n; t += gridDim.y) {
    const T* gate = gate_up + t * 2 * inter;
    const T* up = gate + inter;
    T* o = out + t * inter;
    if constexpr (kVectors) {
      const uint4 gv = reinterpret_cast<const uint4*>(gate)[j];
      const uint4 uv = reinterpret_cast<const uint4*>(up)[j];
      float f[kVec];
      for (int i = 0; i < kVec; ++i) f[i] = gated(lane_of<T>(gv, i), lane_of<T>(uv, i), gelu);
      reinterpret_cast<uint4*>(o)[j] = pack8<T>(f);
    } else {
      o[j] = from_float<T>(gated(to_float(gate[j]), to_float(up[j]), gelu));
    }
  }
}

// gated_activation_kernel's values written as FP8 (write_fp8_row): one block per row, rows
// blockIdx.x, + gridDim.x, ...
template <typename T, bool kVectors>
__global__ void gated_activation_fp8_kernel(const T* gate_up, int64_t n, int64_t inter, bool gelu,
                                            Fp8Rows out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ uint32_t shared[kThreads / kWarpSize + 1];
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    const T* gate = gate_up + t * 2 * inter;
    const T* up = gate + inter;
    if constexpr (kVectors) {
      write_fp8_row<true>(out, t, inter, shared, [&](auto visit) {
        for (int64_t j = threadIdx.x; j < inter / kVec; j += blockDim.x) {
          const uint4 gv = reinterpret_cast<const uint4*>(gate)[j];
          const uint4 uv = reinterpret_cast<const uint4*>(up)[j];
          float f[kVec];
          for (int i = 0; i < kVec; ++i) f[i] = gated(lane_of<T>(gv, i), lane_of<T>(uv, i), gelu);
          round_to<T>(f);
          visit(j, f);
        }
      });
    } else {
      write_fp8_row<false>(out, t, inter, shared, [&](auto visit) {
        for (int64_t j = threadIdx.x; j < inter; j += blockDim.x) {
          visit(j, to_float(from_float<T>(gated(to_float(gate[j]), to_float(up[j]), gelu))));
        }
      });
    }
  }
}

__global__ void soft_cap_kernel(float* x, int64_t n, float cap) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] = cap * tanhf(x[i] / cap);
  }
}

template <typename T>
__global__ void gather_rows_kernel(const T* x, int64_t hidden, const int32_t* rows, T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  const int64_t r = blockIdx.x;
  const T* src = x + static_cast<int64_t>(rows[r]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) out[r * hidden + i] = src[i];
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks < 1 ? 1 : blocks) : 65536);
}

}  // namespace

template <typename T>
gpuError_t convert_f32(const float* src, T* dst, int64_t n, gpuStream_t stream,
                       unsigned long long* first_non_finite, int64_t index_base) {
  if (n <= 0) return gpuSuccess;
  convert_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, dst, n, first_non_finite,
                                                            index_base);
  return gpuGetLastError();
}

template <typename T>
gpuError_t fill_uniform(T* dst, int64_t n, uint64_t seed, float lo, float hi,
                        gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  fill_uniform_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, n, seed, lo, hi);
  return gpuGetLastError();
}

template <typename T>
gpuError_t embedding(const T* table, int64_t first_id, int64_t rows, int64_t hidden,
                     const int32_t* ids, int64_t n, float scale, T* out, gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  return launch(embedding_kernel<T>, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream,
                table, first_id, rows, hidden, ids, scale, out);
}

template <typename T>
gpuError_t rms_norm(T* residual, const T* x, const T* w, int64_t n, int64_t hidden, float eps,
                    float weight_offset, T* out, gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  auto kernel = vectorizable(hidden, {residual, x, w, out}) ? rms_norm_kernel<T, true, false>
                                                             : rms_norm_kernel<T, false, false>;
  return launch(kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream, residual, x,
                w, hidden, eps, weight_offset, out, Fp8Rows{});
}

template <typename T>
gpuError_t rms_norm_fp8(T* residual, const T* x, const T* w, int64_t n, int64_t hidden, float eps,
                        float weight_offset, const Fp8Rows& out, gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  // 8-byte code stores: a 16-byte aligned row start is more than they need.
  auto kernel = vectorizable(hidden, {residual, x, w, out.codes})
                    ? rms_norm_kernel<T, true, true>
                    : rms_norm_kernel<T, false, true>;
  return launch(kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream, residual, x,
                w, hidden, eps, weight_offset, static_cast<T*>(nullptr), out);
}

template <typename T>
gpuError_t gated_activation(const T* gate_up, int64_t n, int64_t inter, bool gelu, T* out,
                            gpuStream_t stream) {
  if (n <= 0 || inter <= 0) return gpuSuccess;
  const bool vectors = vectorizable(inter, {gate_up, out});
  const int64_t per_block = static_cast<int64_t>(kThreads) * (vectors ? kVec : 1);
  const dim3 grid(static_cast<unsigned>((inter + per_block - 1) / per_block),
                  static_cast<unsigned>(n < 65535 ? n : 65535));
  return launch(vectors ? gated_activation_kernel<T, true> : gated_activation_kernel<T, false>,
                grid, dim3(kThreads), 0, stream, gate_up, n, inter, gelu, out);
}

template <typename T>
gpuError_t gated_activation_fp8(const T* gate_up, int64_t n, int64_t inter, bool gelu,
                                const Fp8Rows& out, gpuStream_t stream) {
  if (n <= 0 || inter <= 0) return gpuSuccess;
  const bool vectors = vectorizable(inter, {gate_up, out.codes});
  return launch(vectors ? gated_activation_fp8_kernel<T, true> : gated_activation_fp8_kernel<T, false>,
                dim3(static_cast<unsigned>(n < 65535 ? n : 65535)), dim3(kThreads), 0, stream,
                gate_up, n, inter, gelu, out);
}

gpuError_t soft_cap(float* x, int64_t n, float cap, gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  return launch(soft_cap_kernel, dim3(grid_for(n)), dim3(kThreads), 0, stream, x, n, cap);
}

template <typename T>
gpuError_t gather_rows(const T* x, int64_t hidden, const int32_t* rows, int64_t n_rows, T* out,
                       gpuStream_t stream) {
  if (n_rows <= 0) return gpuSuccess;
  return launch(gather_rows_kernel<T>, dim3(static_cast<unsigned>(n_rows)), dim3(kThreads), 0,
                stream, x, hidden, rows, out);
}

#define TESSERA_ELEMENTWISE_LAUNCHERS(T)                                                        \
  template gpuError_t convert_f32(const float*, T*, int64_t, gpuStream_t, unsigned long long*,   \
                                  int64_t);                                                     \
  template gpuError_t fill_uniform(T*, int64_t, uint64_t, float, float, gpuStream_t);           \
  template gpuError_t embedding(const T*, int64_t, int64_t, int64_t, const int32_t*, int64_t,   \
                                float, T*, gpuStream_t);                                        \
  template gpuError_t rms_norm(T*, const T*, const T*, int64_t, int64_t, float, float, T*,       \
                               gpuStream_t);                                                    \
  template gpuError_t gated_activation(const T*, int64_t, int64_t, bool, T*, gpuStream_t);      \
  template gpuError_t rms_norm_fp8(T*, const T*, const T*, int64_t, int64_t, float, float,       \
                                   const Fp8Rows&, gpuStream_t);                                 \
  template gpuError_t gated_activation_fp8(const T*, int64_t, int64_t, bool, const Fp8Rows&,     \
                                           gpuStream_t);                                         \
  template gpuError_t gather_rows(const T*, int64_t, const int32_t*, int64_t, T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ELEMENTWISE_LAUNCHERS)
#undef TESSERA_ELEMENTWISE_LAUNCHERS

}  // namespace tessera::gpu
