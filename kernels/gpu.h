// The one place where CUDA and HIP differ, and where the two 16-bit element types the GPU backend
// computes in (bf16, fp16) differ. Everything under kernels/ uses the neutral gpu* names below, so
// that a runtime call with no HIP twin cannot slip in, kWarpSize instead of a literal 32 (a CDNA
// wavefront is 64 lanes), and Element<T> instead of a type's own conversion intrinsics.
#pragma once

#include <cstdint>
#include <string>

// Kernel translation units (.cu) define TESSERA_GPU_KERNELS_ONLY to keep abseil out of the device
// compiler; their launchers return gpuError_t, which the host code turns into a Status.
#if !defined(TESSERA_GPU_KERNELS_ONLY)
#include "absl/status/status.h"
#include "base/str_cat.h"
#endif

#if defined(TESSERA_GPU_HIP) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define TESSERA_HIP 1
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
#if __has_include(<hip/hip_bf16.h>)
#include <hip/hip_bf16.h>
using gpu_bf16 = __hip_bfloat16;
#else
// ROCm before 5.7 (Debian's 5.2, which the build host's HIP drift check compiles with) has only
// the hip_bfloat16 class: the CUDA-style conversion names on top of it.
#include <hip/hip_bfloat16.h>
using gpu_bf16 = hip_bfloat16;
__host__ __device__ inline float __bfloat162float(hip_bfloat16 v) { return static_cast<float>(v); }
__host__ __device__ inline hip_bfloat16 __float2bfloat16(float v) { return hip_bfloat16(v); }
#endif
using gpu_f16 = __half;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr gpuError_t gpuErrorMemoryAllocation = hipErrorOutOfMemory;
inline constexpr gpuError_t gpuErrorInvalidValue = hipErrorInvalidValue;
inline constexpr gpuError_t gpuErrorPeerAccessAlreadyEnabled = hipErrorPeerAccessAlreadyEnabled;
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDeviceGetAttribute hipDeviceGetAttribute
inline constexpr hipDeviceAttribute_t gpuDevAttrMultiProcessorCount =
    hipDeviceAttributeMultiprocessorCount;
using gpuDeviceProp = hipDeviceProp_t;
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocHost hipHostMalloc
#define gpuFreeHost hipHostFree
#define gpuMemcpy hipMemcpy
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemGetInfo hipMemGetInfo
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetDevice hipGetDevice
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define gpuMemcpyPeerAsync hipMemcpyPeerAsync
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuStreamWaitEvent hipStreamWaitEvent
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
#define gpuStreamBeginCapture hipStreamBeginCapture
#define gpuStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuGraphLaunch hipGraphLaunch
inline gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph) {
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
}
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define TESSERA_CUDA 1
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
using gpu_bf16 = __nv_bfloat16;
using gpu_f16 = __half;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr gpuError_t gpuErrorMemoryAllocation = cudaErrorMemoryAllocation;
inline constexpr gpuError_t gpuErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr gpuError_t gpuErrorPeerAccessAlreadyEnabled = cudaErrorPeerAccessAlreadyEnabled;
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDeviceGetAttribute cudaDeviceGetAttribute
inline constexpr cudaDeviceAttr gpuDevAttrMultiProcessorCount = cudaDevAttrMultiProcessorCount;
using gpuDeviceProp = cudaDeviceProp;
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocHost cudaMallocHost
#define gpuFreeHost cudaFreeHost
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemGetInfo cudaMemGetInfo
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetDevice cudaGetDevice
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define gpuMemcpyPeerAsync cudaMemcpyPeerAsync
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuStreamWaitEvent cudaStreamWaitEvent
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
#define gpuStreamBeginCapture cudaStreamBeginCapture
#define gpuStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuGraphLaunch cudaGraphLaunch
inline gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph) {
  return cudaGraphInstantiate(exec, graph, 0);
}
#endif

namespace tessera::gpu {

// Lanes per warp (CUDA) or wavefront (CDNA). RDNA runs wave32, but tessera targets CDNA on ROCm.
#if defined(TESSERA_HIP)
inline constexpr int kWarpSize = 64;
#else
inline constexpr int kWarpSize = 32;
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// The 16 bits of a bf16 or fp16 value.
template <typename T>
__device__ __forceinline__ uint32_t bits_of(T v) {
  return *reinterpret_cast<const uint16_t*>(&v);
}
// Two values of T, rounded from lo and hi, packed as in memory (lo in the low 16 bits).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(T lo, T hi) {
  return bits_of(lo) | (bits_of(hi) << 16);
}

// The element types of GPU tensors: kernels are templates over exactly gpu_bf16 and gpu_f16 and
// compute in fp32; Element<T> converts one element, or a packed pair (two elements in 32 bits,
// the low one first, as in memory and in MMA fragments). The two types round differently (bf16:
// 8 significant bits, fp32's range; fp16: 11 bits, largest finite 65504), both to nearest even.
template <typename T>
struct Element;
template <>
struct Element<gpu_bf16> {
  __device__ __forceinline__ static float to_float(gpu_bf16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static gpu_bf16 from_float(float v) { return __float2bfloat16(v); }
  // A bf16 is the top half of an fp32: plain bit moves, the same on both vendors.
  __device__ __forceinline__ static float lo(uint32_t pair) { return __uint_as_float(pair << 16); }
  __device__ __forceinline__ static float hi(uint32_t pair) {
    return __uint_as_float(pair & 0xffff0000u);
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    return pack_pair(from_float(lo), from_float(hi));
  }
};
template <>
struct Element<gpu_f16> {
  __device__ __forceinline__ static float to_float(gpu_f16 v) { return __half2float(v); }
  __device__ __forceinline__ static gpu_f16 from_float(float v) { return __float2half_rn(v); }
  __device__ __forceinline__ static float lo(uint32_t pair) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(pair & 0xffffu)));
  }
  __device__ __forceinline__ static float hi(uint32_t pair) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(pair >> 16)));
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    return pack_pair(from_float(lo), from_float(hi));
  }
};
template <typename T>
__device__ __forceinline__ float to_float(T v) {
  return Element<T>::to_float(v);
}
template <typename T>
__device__ __forceinline__ T from_float(float v) {
  return Element<T>::from_float(v);
}
// fp32 tensors (logits, reductions) through the same calls: no conversion.
__device__ __forceinline__ float to_float(float v) { return v; }
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
// The weight check at load (dequant.cu's conversion, convert_f32): lowers *first_bad to `index`
// when `v`, an element just converted, is NaN or infinite. Only bad elements touch the atomic, so
// a finite tensor costs a compare per element.
template <typename T>
__device__ __forceinline__ void note_non_finite(T v, unsigned long long index,
                                                unsigned long long* first_bad) {
  if ((__float_as_uint(to_float(v)) & 0x7f800000u) == 0x7f800000u) atomicMin(first_bad, index);
}
// Expands X(T) once per element type: the explicit instantiations of a kernel family's
// launchers, so that every family is built for the same two types and no others.
#define TESSERA_FOR_EACH_ELEMENT_TYPE(X) X(gpu_bf16) X(gpu_f16)

// Butterfly shuffle within a warp, all lanes active.
template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int lane_mask) {
#if defined(TESSERA_HIP)
  return __shfl_xor(v, lane_mask, kWarpSize);
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, kWarpSize);
#endif
}
// Lane `src`'s value, all lanes active.
template <typename T>
__device__ __forceinline__ T shfl_from(T v, int src) {
#if defined(TESSERA_HIP)
  return __shfl(v, src, kWarpSize);
#else
  return __shfl_sync(0xffffffffu, v, src, kWarpSize);
#endif
}
// One bit per lane (64 on CDNA), all lanes active.
using LaneMask = unsigned long long;
__device__ __forceinline__ LaneMask warp_ballot(bool pred) {
#if defined(TESSERA_HIP)
  return __ballot(pred);
#else
  return __ballot_sync(0xffffffffu, pred);
#endif
}
__device__ __forceinline__ int lowest_lane(LaneMask m) { return __ffsll(static_cast<long long>(m)) - 1; }

// op over v of every thread of the block, on every thread: a butterfly within each warp, then
// the warps' results (in `shared`, one T per warp) folded in warp order from `identity`. Every
// thread of the block calls it (it synchronizes the block twice).
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, T* shared, T identity, Op op) {
  for (int m = kWarpSize / 2; m > 0; m >>= 1) v = op(v, shfl_xor(v, m));
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int n_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = identity;
  for (int w = 0; w < n_warps; ++w) total = op(total, shared[w]);
  __syncthreads();
  return total;
}
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a > b ? a : b; }
};
// The sum of v over the block's threads, on every thread; `shared` holds a float per warp.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  return block_reduce(v, shared, 0.0f, SumOp{});
}

// One fp32 product / sum / difference rounded on its own, never contracted into an fma with a
// neighbouring operation (results that must equal a host computation bit for bit).
#if defined(TESSERA_HIP)
__device__ __forceinline__ float mul_rn(float a, float b) {
#pragma clang fp contract(off)
  return a * b;
}
__device__ __forceinline__ float add_rn(float a, float b) {
#pragma clang fp contract(off)
  return a + b;
}
__device__ __forceinline__ float sub_rn(float a, float b) {
#pragma clang fp contract(off)
  return a - b;
}
#else
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
#endif
#endif

#if !defined(TESSERA_GPU_KERNELS_ONLY)
// The status of a failed runtime call: where, which call, and the runtime's own words.
inline absl::Status status_from(gpuError_t err, const char* expr, const char* file, int line) {
  return absl::InternalError(tessera::str_cat(file, ":", line, ": ", expr, " failed: ",
                                              gpuGetErrorName(err), " (", gpuGetErrorString(err),
                                              ")"));
}

#endif  // !TESSERA_GPU_KERNELS_ONLY

}  // namespace tessera::gpu

#if !defined(TESSERA_GPU_KERNELS_ONLY)
// Evaluates a runtime call; on failure returns an absl::Status (Internal) from the enclosing
// function naming the file, line, call and error string.
#define GPU_CHECK(expr)                                                              \
  do {                                                                               \
    const gpuError_t tessera_gpu_err_ = (expr);                                      \
    if (tessera_gpu_err_ != gpuSuccess) {                                            \
      return ::tessera::gpu::status_from(tessera_gpu_err_, #expr, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

// The same as an expression: the status of `expr` (Ok on success), for functions that record
// errors instead of returning them.
#define GPU_STATUS(expr)                                                                 \
  ([&]() -> ::absl::Status {                                                             \
    const gpuError_t tessera_gpu_err_ = (expr);                                          \
    return tessera_gpu_err_ == gpuSuccess                                                \
               ? ::absl::OkStatus()                                                      \
               : ::tessera::gpu::status_from(tessera_gpu_err_, #expr, __FILE__, __LINE__); \
  }())
#endif  // !TESSERA_GPU_KERNELS_ONLY
