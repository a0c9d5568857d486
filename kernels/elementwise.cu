// Elementwise and row-wise GPU kernels: dtype conversion, embedding (scaled), RMSNorm (plain and
// fused with the residual add, weights with an offset), gated activations (SiLU, GELU-tanh),
// soft-capping, row gather, and a seeded uniform fill (benchmark inputs made on the device).
// 16-bit storage (T: gpu_bf16 or gpu_f16), fp32 arithmetic.
#define TESSERA_GPU_KERNELS_ONLY
#include <cstdint>
#include <initializer_list>

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

// One block per row. kVectors: rows walked in 16-byte vectors (vectorizable()), else element by
// element; the arithmetic is the same per element either way (the sum of squares adds in another
// order, so the two paths may differ in the last bit).
template <typename T, bool kVectors>
__global__ void rms_norm_kernel(T* residual, const T* x, const T* w, int64_t hidden, float eps,
                                float weight_offset, T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ float shared[kThreads / kWarpSize + 1];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* rr = residual == nullptr ? nullptr : residual + row * hidden;
  const T* src = rr != nullptr ? rr : xr;
  T* o = out + row * hidden;
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
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      const uint4 sv = reinterpret_cast<const uint4*>(src)[v];
      const uint4 wv = reinterpret_cast<const uint4*>(w)[v];
      float f[kVec];
      for (int i = 0; i < kVec; ++i) f[i] = lane_of<T>(sv, i) * inv_rms * weight(lane_of<T>(wv, i));
      reinterpret_cast<uint4*>(o)[v] = pack8<T>(f);
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
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      o[i] = from_float<T>(to_float(src[i]) * inv_rms * weight(to_float(w[i])));
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
  auto kernel = vectorizable(hidden, {residual, x, w, out}) ? rms_norm_kernel<T, true>
                                                             : rms_norm_kernel<T, false>;
  return launch(kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream, residual, x,
                w, hidden, eps, weight_offset, out);
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
  template gpuError_t gather_rows(const T*, int64_t, const int32_t*, int64_t, T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ELEMENTWISE_LAUNCHERS)
#undef TESSERA_ELEMENTWISE_LAUNCHERS

}  // namespace tessera::gpu
