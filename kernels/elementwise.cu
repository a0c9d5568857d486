// Elementwise and row-wise GPU kernels: dtype conversion, embedding (scaled), RMSNorm (plain and
// fused with the residual add, weights with an offset), gated activations (SiLU, GELU-tanh),
// soft-capping, row gather, and a seeded uniform fill (benchmark inputs made on the device).
// 16-bit storage (T: gpu_bf16 or gpu_f16), fp32 arithmetic.
#define TESSERA_GPU_KERNELS_ONLY
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

template <typename T>
__global__ void rms_norm_kernel(T* residual, const T* x, const T* w, int64_t hidden, float eps,
                                float weight_offset, T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ float shared[kThreads / kWarpSize + 1];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* rr = residual == nullptr ? nullptr : residual + row * hidden;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_float(xr[i]);
    if (rr != nullptr) {
      // The residual stream is stored in T: normalize what is stored, as later reads see it.
      const T s = from_float<T>(to_float(rr[i]) + v);
      rr[i] = s;
      v = to_float(s);
    }
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(sum_sq, shared) / static_cast<float>(hidden) + eps);
  const T* src = rr != nullptr ? rr : xr;
  T* o = out + row * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    // An offset of 0 multiplies by w itself (not 0 + w, which would turn -0 into +0).
    const float wi = weight_offset == 0.0f ? to_float(w[i]) : weight_offset + to_float(w[i]);
    o[i] = from_float<T>(to_float(src[i]) * inv_rms * wi);
  }
}

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

template <typename T>
__global__ void gated_activation_kernel(const T* gate_up, int64_t n, int64_t inter, bool gelu,
                                        T* out) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  const int64_t total = n * inter;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / inter, j = i % inter;
    const float g = to_float(gate_up[t * 2 * inter + j]);
    const float u = to_float(gate_up[t * 2 * inter + inter + j]);
    out[i] = from_float<T>((gelu ? gelu_tanh(g) : g / (1.0f + __expf(-g))) * u);
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
  return launch(rms_norm_kernel<T>, dim3(static_cast<unsigned>(n)), dim3(kThreads), 0, stream,
                residual, x, w, hidden, eps, weight_offset, out);
}

template <typename T>
gpuError_t gated_activation(const T* gate_up, int64_t n, int64_t inter, bool gelu, T* out,
                            gpuStream_t stream) {
  if (n <= 0) return gpuSuccess;
  return launch(gated_activation_kernel<T>, dim3(grid_for(n * inter)), dim3(kThreads), 0, stream,
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
  template gpuError_t gather_rows(const T*, int64_t, const int32_t*, int64_t, T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ELEMENTWISE_LAUNCHERS)
#undef TESSERA_ELEMENTWISE_LAUNCHERS

}  // namespace tessera::gpu
