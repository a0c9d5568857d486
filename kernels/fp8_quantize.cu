// FP8 quantization kernels (see fp8_quantize.h).
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/fp8_quantize.h"

#include <cstring>

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;               // 16-bit elements per 16-byte load
constexpr int64_t kMaxBlocks = 1024;  // grid-stride beyond this

struct PerTensorScratch {
  uint32_t amax_bits;    // the largest |x| so far, as bits (non-negative floats order as unsigned)
  uint32_t blocks_done;  // blocks of the amax pass that have added theirs
};
static_assert(sizeof(PerTensorScratch) == kFp8PerTensorScratchBytes);

// Whether 8 elements at x + i (i a multiple of 8) can be read as one 16-byte vector and their
// codes written as one 8-byte store.
template <typename T>
__device__ __forceinline__ bool vectorizable(const T* x, const uint8_t* q) {
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         (q == nullptr || reinterpret_cast<uintptr_t>(q) % 8 == 0);
}

// x as fp32, a NaN with x's sign: the device's fp16 -> fp32 conversion gives the canonical
// (positive) NaN, the host's keeps the sign, and the encoder keeps it into the code.
template <typename T>
__device__ __forceinline__ float value_of(T x) {
  const float f = to_float(x);
  return isnan(f) ? __uint_as_float(((bits_of(x) & 0x8000u) << 16) | 0x7fc00000u) : f;
}

template <typename T>
__device__ __forceinline__ void load8(const T* x, float (&f)[kVec]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(x);
  T e[kVec];
  memcpy(e, &raw, sizeof(raw));
  for (int j = 0; j < kVec; ++j) f[j] = value_of(e[j]);
}

// The largest of v over the block, on every thread; `shared` holds one value per warp.
__device__ __forceinline__ uint32_t block_max(uint32_t v, uint32_t* shared) {
  return block_reduce(v, shared, 0u, MaxOp{});
}

// The largest |x[i]| of the elements this thread visits: first, first + stride, ... (in 8-element
// vectors where x is aligned, then the tail).
template <typename T>
__device__ uint32_t thread_amax(const T* x, int64_t count, int64_t first, int64_t stride) {
  uint32_t m = 0;
  if (vectorizable(x, nullptr)) {
    const int64_t vectors = count / kVec;
    for (int64_t v = first; v < vectors; v += stride) {
      float f[kVec];
      load8(x + v * kVec, f);
      for (int j = 0; j < kVec; ++j) m = max(m, fp8_abs_bits(f[j]));
    }
    for (int64_t i = vectors * kVec + first; i < count; i += stride) {
      m = max(m, fp8_abs_bits(value_of(x[i])));
    }
  } else {
    for (int64_t i = first; i < count; i += stride) m = max(m, fp8_abs_bits(value_of(x[i])));
  }
  return m;
}

// q = fp8(x / scale) over the elements this thread visits.
template <typename T>
__device__ void quantize_range(const T* x, int64_t count, float scale, Fp8Encoding enc,
                               uint8_t* q, int64_t first, int64_t stride) {
  if (vectorizable(x, q)) {
    const int64_t vectors = count / kVec;
    for (int64_t v = first; v < vectors; v += stride) {
      float f[kVec];
      load8(x + v * kVec, f);
      uint8_t codes[kVec];
      for (int j = 0; j < kVec; ++j) codes[j] = fp8_encode_scaled(f[j], scale, enc);
      uint2 packed;
      memcpy(&packed, codes, sizeof(packed));
      *reinterpret_cast<uint2*>(q + v * kVec) = packed;
    }
    for (int64_t i = vectors * kVec + first; i < count; i += stride) {
      q[i] = fp8_encode_scaled(value_of(x[i]), scale, enc);
    }
  } else {
    for (int64_t i = first; i < count; i += stride) q[i] = fp8_encode_scaled(value_of(x[i]), scale, enc);
  }
}

// Per-tensor amax: each block's maximum into the scratch; the last block to finish turns the
// total into the scale.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    tensor_amax_kernel(const T* __restrict__ x, int64_t count, Fp8Encoding enc, float* scale,
                       PerTensorScratch* scratch) {
  __shared__ uint32_t shared[kThreads / 32];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const uint32_t m =
      block_max(thread_amax(x, count, blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x,
                            stride),
                shared);
  if (threadIdx.x != 0) return;
  atomicMax(&scratch->amax_bits, m);
  __threadfence();  // the maximum is visible before this block counts as done
  if (atomicAdd(&scratch->blocks_done, 1u) == gridDim.x - 1) {
    __threadfence();
    const uint32_t total = atomicMax(&scratch->amax_bits, 0u);  // read through the L2
    *scale = fp8_scale_for_amax(__uint_as_float(total), enc);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantize_with_scale_kernel(const T* __restrict__ x, int64_t count, Fp8Encoding enc,
                               const float* __restrict__ scale, uint8_t* __restrict__ q) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  quantize_range(x, count, *scale, enc, q,
                 blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x, stride);
}

// One block per row: the row's amax, its scale, then its codes.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    row_quantize_kernel(const T* __restrict__ w, int64_t cols, Fp8Encoding enc,
                        uint8_t* __restrict__ q, float* __restrict__ row_scales) {
  __shared__ uint32_t shared[kThreads / 32];
  const int64_t row = blockIdx.x;
  const T* x = w + row * cols;
  uint8_t* out = q + row * cols;
  const uint32_t m = block_max(thread_amax(x, cols, threadIdx.x, kThreads), shared);
  const float scale = fp8_scale_for_amax(__uint_as_float(m), enc);
  if (threadIdx.x == 0) row_scales[row] = scale;
  quantize_range(x, cols, scale, enc, out, threadIdx.x, kThreads);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* __restrict__ q, int64_t rows, int64_t cols, Fp8Encoding enc,
                      const float* __restrict__ scales, bool per_row, T* __restrict__ x) {
  const int64_t count = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < count;
       i += stride) {
    x[i] = from_float<T>(fp8_e4m3_value(q[i], enc) * scales[per_row ? i / cols : 0]);
  }
}

unsigned grid_for(int64_t count) {
  const int64_t per_block = static_cast<int64_t>(kThreads) * kVec;
  const int64_t blocks = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace

template <typename T>
gpuError_t quantize_fp8_per_tensor(const T* x, int64_t count, Fp8Encoding enc, uint8_t* q,
                                   float* scale, void* scratch, gpuStream_t stream) {
  if (count <= 0) return gpuSuccess;
  if (const gpuError_t e = gpuMemsetAsync(scratch, 0, kFp8PerTensorScratchBytes, stream);
      e != gpuSuccess) {
    return e;
  }
  tensor_amax_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(
      x, count, enc, scale, static_cast<PerTensorScratch*>(scratch));
  if (const gpuError_t e = gpuGetLastError(); e != gpuSuccess) return e;
  return quantize_fp8_with_scale(x, count, enc, scale, q, stream);
}

template <typename T>
gpuError_t quantize_fp8_with_scale(const T* x, int64_t count, Fp8Encoding enc, const float* scale,
                                   uint8_t* q, gpuStream_t stream) {
  if (count <= 0) return gpuSuccess;
  quantize_with_scale_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(x, count, enc, scale, q);
  return gpuGetLastError();
}

template <typename T>
gpuError_t quantize_fp8_per_row(const T* w, int64_t rows, int64_t cols, Fp8Encoding enc,
                                uint8_t* q, float* row_scales, gpuStream_t stream) {
  if (rows <= 0 || cols <= 0) return gpuSuccess;
  row_quantize_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(w, cols, enc, q,
                                                                                row_scales);
  return gpuGetLastError();
}

template <typename T>
gpuError_t dequantize_fp8(const uint8_t* q, int64_t rows, int64_t cols, Fp8Encoding enc,
                          const float* scales, bool per_row, T* x, gpuStream_t stream) {
  if (rows <= 0 || cols <= 0) return gpuSuccess;
  dequantize_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(q, rows, cols, enc, scales,
                                                                       per_row, x);
  return gpuGetLastError();
}

#define TESSERA_FP8_QUANTIZE_LAUNCHERS(T)                                                     \
  template gpuError_t quantize_fp8_per_tensor(const T*, int64_t, Fp8Encoding, uint8_t*, float*, \
                                              void*, gpuStream_t);                            \
  template gpuError_t quantize_fp8_with_scale(const T*, int64_t, Fp8Encoding, const float*,    \
                                              uint8_t*, gpuStream_t);                         \
  template gpuError_t quantize_fp8_per_row(const T*, int64_t, int64_t, Fp8Encoding, uint8_t*,  \
                                           float*, gpuStream_t);                              \
  template gpuError_t dequantize_fp8(const uint8_t*, int64_t, int64_t, Fp8Encoding,            \
                                     const float*, bool, T*, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_FP8_QUANTIZE_LAUNCHERS)
#undef TESSERA_FP8_QUANTIZE_LAUNCHERS

}  // namespace tessera::gpu
