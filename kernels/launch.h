// Overlapped kernel launches: programmatic dependent launch (PDL) on Hopper and later.
//
// A stream runs its kernels one after another: the next kernel's CTAs start only once every CTA of
// the previous one has finished and its writes are visible, and between the two the SMs idle
// through the launch (~1.8 us measured on an H100 between dependent launches) and through the
// previous kernel's last, partly empty wave. For decode, where every kernel is short and most are
// bound by memory bandwidth, that idle time is a large share of a step.
//
// launch() starts a kernel with the stream's serialization relaxed: its CTAs may start while the
// previous kernel is finishing. The rules for a kernel launched this way:
//  (a) Every CTA calls wait_for_prior_kernels() before it exits, and before it writes anything
//      (an earlier kernel may still be reading) or reads anything an earlier kernel of the stream
//      wrote. Since the grid then cannot end before its predecessor has, and the predecessor
//      waited for its own, the ordering is transitive: a kernel's wait covers every earlier kernel.
//  (b) Before the wait it may read only what no kernel of the stream writes: weights (the small-M
//      GEMMs prefetch their first ones into L2, RMSNorm loads its weight vectors; stream_read,
//      the benchmark's read-only reference, reads all its data), and the step's metadata, copied
//      from the host before the step's first kernel (the paired prefill kernel reads its first
//      block-table slots, decode attention its sequence's, RoPE computes its angles).
// Kernels call let_next_kernel_start() once running, so that the next kernel's launch overlaps
// their work. Kernels launched plainly (cuBLASLt, the unpaired prefill kernel, copies) keep full
// serialization on both sides.
//
// Graph capture keeps the relaxed edges (CUDA 12.3+). Only Hopper (sm_90) runs code with the
// wait compiled in: the build carries sm_90a machine code, and other GPUs run sm_80 code or JIT
// the compute_80 PTX, where the device calls compile to nothing -- so launch() overlaps only on
// compute capability 9.x (a build adding a newer target with the wait compiled in must extend
// that), and is a plain launch on HIP. The environment variable TESSERA_OVERLAP_LAUNCHES=0 (or
// off / false / no) makes it a plain launch everywhere (for measuring what the overlap gives, or
// ruling it out).
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
// when the kernel was launched plainly (the stream already ordered it) and in code compiled for
// targets without PDL.
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

// Whether launches on the current device overlap (compute capability 9.x, not switched off by
// TESSERA_OVERLAP_LAUNCHES). Asked once per device and remembered.
inline bool overlapped_launches_enabled() {
#if defined(TESSERA_CUDA)
  static const bool allowed = [] {
    const char* v = std::getenv("TESSERA_OVERLAP_LAUNCHES");
    if (v == nullptr) return true;
    for (const char* off : {"0", "off", "false", "no", "OFF", "FALSE", "NO"}) {
      if (std::strcmp(v, off) == 0) return false;
    }
    return true;
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
    known = major == 9 ? 2 : 1;
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
    const cudaError_t err = cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
    // As a plain launch's error is taken by gpuGetLastError(): not left for the next check.
    if (err != cudaSuccess) (void)cudaGetLastError();
    return err;
  }
#endif
  kernel<<<grid, block, shared_bytes, stream>>>(static_cast<Params>(args)...);
  return gpuGetLastError();
}
#endif

}  // namespace tessera::gpu
