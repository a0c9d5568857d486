// Overlapped kernel launches: programmatic dependent launch (PDL) on Hopper and later.
//
// A stream runs its kernels one after another: the next kernel's CTAs start only once every CTA of
// the previous one has finished and its writes are visible, and between the two the SMs idle
// through the launch (~1.8 us measured on an H100 between dependent launches) and through the
// previous kernel's last, partly empty wave. For decode, where every kernel is short and most are
// bound by memory bandwidth, that idle time is a large share of a step.
//
// launch() starts a kernel with the stream's serialization relaxed: its CTAs may start while the
// previous kernel is finishing. Such a kernel must call wait_for_prior_kernels() before it reads
// anything an earlier kernel of the stream wrote, and before it writes anything at all -- an earlier
// kernel may still be reading -- and may do only independent work before that: the GEMM kernels load
// their first weights (constant while serving), everything else waits first thing. Since every
// kernel launched this way waits for its predecessor, which waited for its own, the guarantee is
// transitive. Kernels call let_next_kernel_start() once all their CTAs are running, so that the next
// kernel's launch overlaps their work.
//
// Graph capture keeps the relaxed edges (CUDA 12.3+). Where the hardware lacks PDL (HIP, CUDA
// devices before sm_90) the device calls compile to nothing and launch() is a plain launch; the
// environment variable TESSERA_OVERLAP_LAUNCHES=0 makes it a plain launch everywhere (for
// measuring what the overlap gives, or ruling it out).
#pragma once

#include "kernels/gpu.h"

#if !defined(__CUDACC_RTC__)
#include <atomic>
#include <cstdlib>
#include <cstring>
#endif

namespace tessera::gpu {

#if defined(__CUDACC__) || defined(__HIPCC__)
// Blocks until every earlier kernel of the stream has finished and its writes are visible. A no-op
// when the kernel was launched plainly (the stream already ordered it) and on hardware without PDL.
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(TESSERA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the stream's next kernel begin launching once every CTA of this one has called this (or
// exited). It does not make this kernel's writes visible early: the next one still waits for them
// in wait_for_prior_kernels().
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(TESSERA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
#endif

// Whether launches on the current device may overlap (sm_90+, not switched off by
// TESSERA_OVERLAP_LAUNCHES=0). Asked once per device and remembered.
inline bool overlapped_launches_enabled() {
#if defined(TESSERA_CUDA)
  static const bool allowed = [] {
    const char* v = std::getenv("TESSERA_OVERLAP_LAUNCHES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  if (!allowed) return false;
  constexpr int kMaxDevices = 64;
  // 0: not asked yet, 1: no, 2: yes.
  static std::atomic<int8_t> per_device[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  int8_t known = per_device[device].load(std::memory_order_relaxed);
  if (known == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      return false;
    }
    known = major >= 9 ? 2 : 1;
    per_device[device].store(known, std::memory_order_relaxed);
  }
  return known == 2;
#else
  return false;
#endif
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// kernel<<<grid, block, shared_bytes, stream>>>(args...), overlapping the previous kernel where the
// device allows (see above); the launch's error, as gpuGetLastError() would give it.
template <typename... Params, typename... Args>
gpuError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                  gpuStream_t stream, Args... args) {
#if defined(TESSERA_CUDA)
  if (overlapped_launches_enabled()) {
    cudaLaunchAttribute overlap[1];
    overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    overlap[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = overlap;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
  }
#endif
  kernel<<<grid, block, shared_bytes, stream>>>(static_cast<Params>(args)...);
  return gpuGetLastError();
}
#endif

}  // namespace tessera::gpu
