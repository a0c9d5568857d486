// The tuner's device-side numerics check (see output_compare.h).
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gemm/output_compare.h"

#include <algorithm>

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) compare_kernel(const T* __restrict__ out,
                                                           const T* __restrict__ ref, int64_t count,
                                                           float rtol, float atol,
                                                           OutputCompareResult* result) {
  uint32_t max_bits = 0, outside = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += stride) {
    const float r = to_float(ref[i]);
    const float err = fabsf(to_float(out[i]) - r);
    if (!(err <= atol + rtol * fabsf(r))) ++outside;
    // err >= 0 (or NaN): its bits order as unsigned integers; a NaN counts as +infinity.
    const uint32_t bits = isnan(err) ? 0x7f800000u : __float_as_uint(err);
    max_bits = max(max_bits, bits);
  }
  // Warp, then block reduction; one atomic pair per block.
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    max_bits = max(max_bits, shfl_xor(max_bits, offset));
    outside += shfl_xor(outside, offset);
  }
  __shared__ uint32_t warp_max[kThreads / 32], warp_outside[kThreads / 32];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  constexpr int kWarps = kThreads / kWarpSize;
  if (lane == 0) {
    warp_max[warp] = max_bits;
    warp_outside[warp] = outside;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) {
      max_bits = max(max_bits, warp_max[w]);
      outside += warp_outside[w];
    }
    if (max_bits != 0) atomicMax(&result->max_error_bits, max_bits);
    if (outside != 0) atomicAdd(&result->outside, outside);
  }
}

}  // namespace

gpuError_t compare_output(const void* out, const void* ref, int64_t count, bool f32, bool f16,
                          float rtol, float atol, OutputCompareResult* result, gpuStream_t stream) {
  if (count < 0 || result == nullptr) return gpuErrorInvalidValue;
  if (count == 0) return gpuSuccess;
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 4096);
  const dim3 grid(static_cast<unsigned>(blocks)), block(kThreads);
  if (f32) {
    compare_kernel<float><<<grid, block, 0, stream>>>(static_cast<const float*>(out),
                                                      static_cast<const float*>(ref), count, rtol,
                                                      atol, result);
  } else if (f16) {
    compare_kernel<gpu_f16><<<grid, block, 0, stream>>>(static_cast<const gpu_f16*>(out),
                                                        static_cast<const gpu_f16*>(ref), count,
                                                        rtol, atol, result);
  } else {
    compare_kernel<gpu_bf16><<<grid, block, 0, stream>>>(static_cast<const gpu_bf16*>(out),
                                                         static_cast<const gpu_bf16*>(ref), count,
                                                         rtol, atol, result);
  }
  return gpuGetLastError();
}

}  // namespace tessera::gpu
