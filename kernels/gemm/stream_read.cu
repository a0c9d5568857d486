// The read-only reference kernel (see stream_read.h).
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gemm/stream_read.h"
#include "kernels/launch.h"
#include "kernels/mma_sm80.h"

#include <algorithm>

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;
constexpr int kCtasPerSm = 2;
constexpr int kLoadsInFlight = 8;
constexpr int64_t kBlockVectors = int64_t{kThreads} * kLoadsInFlight;  // 16-byte vectors

__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
#if defined(TESSERA_CUDA)
  return sm80::load_once(p);
#else
  return *p;
#endif
}

__global__ void __launch_bounds__(kThreads, kCtasPerSm) stream_read_kernel(const uint4* __restrict__ data,
                                                               int64_t vectors,
                                                               int64_t vectors_per_cta,
                                                               uint32_t* __restrict__ sink) {
  let_next_kernel_start();
  const int64_t begin = blockIdx.x * vectors_per_cta;
  const int64_t end = min(vectors, begin + vectors_per_cta);
  uint32_t fold = 0;
  int64_t base = begin;
  // Whole blocks unguarded, so that all eight loads of a thread are issued before the first use.
  for (; base + kBlockVectors <= end; base += kBlockVectors) {
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) v[j] = load_streaming(data + base + j * kThreads + threadIdx.x);
#pragma unroll
    for (int j = 0; j < kLoadsInFlight; ++j) fold ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (int64_t i = base + threadIdx.x; i < end; i += kThreads) {
    const uint4 v = load_streaming(data + i);
    fold ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // The data is constant, so all of it may be read before the previous kernel ends, as the
  // GEMMs read their first weights (launch.h); only the write waits.
  wait_for_prior_kernels();
  if (fold == kStreamReadSinkValue) *sink = fold;
}

}  // namespace

gpuError_t stream_read(const void* data, size_t bytes, int multiprocessors, uint32_t* sink,
                       gpuStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<uintptr_t>(data) % 16 != 0 || multiprocessors < 1) {
    return gpuErrorInvalidValue;
  }
  if (bytes == 0) return gpuSuccess;
  const int64_t vectors = static_cast<int64_t>(bytes / 16);
  const int64_t blocks = (vectors + kBlockVectors - 1) / kBlockVectors;
  const int64_t ctas = std::min<int64_t>(int64_t{multiprocessors} * kCtasPerSm, blocks);
  // Shares in whole blocks of kThreads x kLoadsInFlight vectors, so only the last CTA is short.
  const int64_t per_cta = (blocks + ctas - 1) / ctas * kBlockVectors;
  return launch(stream_read_kernel, dim3(static_cast<unsigned>((vectors + per_cta - 1) / per_cta)),
                dim3(kThreads), 0, stream, static_cast<const uint4*>(data), vectors, per_cta, sink);
}

}  // namespace tessera::gpu
