// The one-shot all-reduce (see one_shot_all_reduce.h): one kernel per op and rank. Block b of
// every rank handles the same elements (rows, for the fused norm), so its barrier needs only block
// b of the other ranks: it stores its epoch + 1 into its slot on every rank (a release at system
// scope, ordering the block's staging writes before it) and waits for every rank's slot on its own
// to reach it (an acquire, ordering the reads of the peers' staging after it).
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/one_shot_all_reduce.h"

#include "kernels/launch.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 512;

// The elements of a 16-byte pack as fp32, and back.
template <typename T>
struct Pack {
  static constexpr int kElems = 8;
  __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      out[2 * j] = Element<T>::lo(w[j]);
      out[2 * j + 1] = Element<T>::hi(w[j]);
    }
  }
  __device__ __forceinline__ static uint4 pack(const float* in) {
    return make_uint4(Element<T>::pack(in[0], in[1]), Element<T>::pack(in[2], in[3]),
                      Element<T>::pack(in[4], in[5]), Element<T>::pack(in[6], in[7]));
  }
};
template <>
struct Pack<float> {
  static constexpr int kElems = 4;
  __device__ __forceinline__ static void unpack(const uint4& v, float* out) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
  __device__ __forceinline__ static uint4 pack(const float* in) {
    return make_uint4(__float_as_uint(in[0]), __float_as_uint(in[1]), __float_as_uint(in[2]),
                      __float_as_uint(in[3]));
  }
};

__device__ __forceinline__ void store_release_system(uint32_t* p, uint32_t v) {
#if defined(TESSERA_CUDA)
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}
__device__ __forceinline__ uint32_t load_acquire_system(const uint32_t* p) {
#if defined(TESSERA_CUDA)
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}

// A peer that has not arrived after this long never will (its op failed to launch, or its host
// stopped queueing): the kernel traps, so the step fails with an error instead of every rank
// waiting for ever. Far above any legitimate skew between the ranks' launches.
constexpr unsigned long long kBarrierTimeoutNs = 120ull * 1000 * 1000 * 1000;

// Traps once kBarrierTimeoutNs have passed since `start_ns` (0: the first call, which starts the
// clock). HIP: never (wall_clock64's rate is the device's own; not wired yet).
__device__ __forceinline__ void trap_after_timeout(unsigned long long& start_ns) {
#if defined(TESSERA_CUDA)
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  if (start_ns == 0) start_ns = now;
  if (now - start_ns > kBarrierTimeoutNs) __trap();
#else
  (void)start_ns;
#endif
}

// Block b's barrier over the ranks at `target` (its epoch + 1): the block's writes before it are
// visible to every rank's block b after it. A peer may already be one op further (its flag then
// reads target + 1): not less is enough.
__device__ __forceinline__ void rank_barrier(const OneShotPeers& peers, int rank, int world,
                                             uint32_t target) {
  const int b = blockIdx.x;
  __syncthreads();
  if (threadIdx.x < world) {
    store_release_system(peers.flags[threadIdx.x] + rank * kOneShotMaxBlocks + b, target);
    const uint32_t* from = peers.flags[rank] + threadIdx.x * kOneShotMaxBlocks + b;
    unsigned long long start_ns = 0;
    for (uint32_t spins = 1; static_cast<int32_t>(load_acquire_system(from) - target) < 0; ++spins) {
      if (spins % 4096 == 0) trap_after_timeout(start_ns);
    }
  }
  __syncthreads();
}

// The sum over the ranks of pack p of their staging (rank order, fp32), unpacked into acc.
template <typename T, int kWorld>
__device__ __forceinline__ void sum_pack(const char* const* src, int world, int64_t p,
                                         float* acc) {
  constexpr int kElems = Pack<T>::kElems;
  float part[kElems];
  if constexpr (kWorld != 0) {
    uint4 v[kWorld];
#pragma unroll
    for (int s = 0; s < kWorld; ++s) v[s] = reinterpret_cast<const uint4*>(src[s])[p];
    Pack<T>::unpack(v[0], acc);
#pragma unroll
    for (int s = 1; s < kWorld; ++s) {
      Pack<T>::unpack(v[s], part);
#pragma unroll
      for (int e = 0; e < kElems; ++e) acc[e] = add_rn(acc[e], part[e]);
    }
  } else {
    Pack<T>::unpack(reinterpret_cast<const uint4*>(src[0])[p], acc);
    for (int s = 1; s < world; ++s) {
      Pack<T>::unpack(reinterpret_cast<const uint4*>(src[s])[p], part);
#pragma unroll
      for (int e = 0; e < kElems; ++e) acc[e] = add_rn(acc[e], part[e]);
    }
  }
}

// The op's epoch for block b (its ops so far, the same on every rank), read once by the block.
__device__ __forceinline__ uint32_t block_epoch(const uint32_t* epochs, uint32_t* shared) {
  if (threadIdx.x == 0) *shared = epochs[blockIdx.x];
  __syncthreads();
  return *shared;
}

// Every rank's staging half `half` (bytes into its staging), in rank order; null past `world`.
template <int kSlots>
__device__ __forceinline__ void staging_sources(const OneShotPeers& peers, int world, size_t half,
                                                const char* (&src)[kSlots]) {
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    src[s] = s < world ? static_cast<const char*>(peers.staging[s]) + half : nullptr;
  }
}

// Pack p (16 bytes) of base: one vector access where base is 16-byte aligned (kVector), else
// element by element. Which pack a thread handles never depends on kVector, so ranks whose
// tensors differ in alignment still split the elements over their blocks alike (the barriers
// pair block b with block b).
template <typename T, bool kVector>
__device__ __forceinline__ uint4 load_pack(const T* base, int64_t p) {
  if constexpr (kVector) {
    return reinterpret_cast<const uint4*>(base)[p];
  } else {
    constexpr int kElems = sizeof(uint4) / sizeof(T);
    T e[kElems];
#pragma unroll
    for (int j = 0; j < kElems; ++j) e[j] = base[p * kElems + j];
    uint4 v;
    memcpy(&v, e, sizeof(v));
    return v;
  }
}
template <typename T, bool kVector>
__device__ __forceinline__ void store_pack(T* base, int64_t p, const uint4& v) {
  if constexpr (kVector) {
    reinterpret_cast<uint4*>(base)[p] = v;
  } else {
    constexpr int kElems = sizeof(uint4) / sizeof(T);
    T e[kElems];
    memcpy(e, &v, sizeof(v));
#pragma unroll
    for (int j = 0; j < kElems; ++j) base[p * kElems + j] = e[j];
  }
}

// kWorld: the number of ranks when known at compile time (2, 4, 8: the loads of every rank in
// flight together), 0 for any other (`world` then).
template <typename T, int kWorld, bool kVector>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(T* x, int64_t n, int rank, int world, OneShotPeers peers, size_t capacity,
                    uint32_t* epochs) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  if constexpr (kWorld != 0) world = kWorld;
  __shared__ uint32_t epoch_shared;
  const int b = blockIdx.x;
  const uint32_t epoch = block_epoch(epochs, &epoch_shared);
  const size_t half = (epoch & 1u) * capacity;
  constexpr int kElems = Pack<T>::kElems;
  const int64_t packs = n / kElems;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(b) * blockDim.x + threadIdx.x;

  // 1. This rank's x into its staging half.
  char* own = static_cast<char*>(peers.staging[rank]) + half;
  for (int64_t p = first; p < packs; p += stride) {
    reinterpret_cast<uint4*>(own)[p] = load_pack<T, kVector>(x, p);
  }
  for (int64_t i = packs * kElems + first; i < n; i += stride) reinterpret_cast<T*>(own)[i] = x[i];

  // 2. Block b's barrier over the ranks.
  rank_barrier(peers, rank, world, epoch + 1);

  // 3. The sum in rank order, the same on every rank.
  const char* src[kWorld != 0 ? kWorld : kOneShotMaxRanks];
  staging_sources(peers, world, half, src);
  for (int64_t p = first; p < packs; p += stride) {
    float acc[kElems];
    sum_pack<T, kWorld>(src, world, p, acc);
    store_pack<T, kVector>(x, p, Pack<T>::pack(acc));
  }
  for (int64_t i = packs * kElems + first; i < n; i += stride) {
    float acc = to_float(reinterpret_cast<const T*>(src[0])[i]);
    for (int s = 1; s < world; ++s) acc = add_rn(acc, to_float(reinterpret_cast<const T*>(src[s])[i]));
    x[i] = from_float<T>(acc);
  }
  if (threadIdx.x == 0) epochs[b] = epoch + 1;
}

// The all-reduce fused with the residual add and RMSNorm that follow it: block b takes rows b,
// b + gridDim.x, ... whole (the norm needs a row's every element). Each row's sum over the ranks
// is rounded to T (what all_reduce_sum would store), added to the residual and rounded (what
// rms_norm_kernel stores), and the row normalized as rms_norm_kernel does.
template <typename T, int kWorld, bool kVector>
__global__ void __launch_bounds__(kThreads)
    one_shot_add_rms_norm_kernel(const T* x, int64_t rows, int64_t cols, T* residual, const T* w,
                                 float eps, float weight_offset, T* out, int rank, int world,
                                 OneShotPeers peers, size_t capacity, uint32_t* epochs) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  if constexpr (kWorld != 0) world = kWorld;
  __shared__ uint32_t epoch_shared;
  __shared__ float shared[kThreads / kWarpSize + 1];
  const int b = blockIdx.x;
  const uint32_t epoch = block_epoch(epochs, &epoch_shared);
  const size_t half = (epoch & 1u) * capacity;
  constexpr int kElems = Pack<T>::kElems;
  const int64_t row_packs = cols / kElems;

  char* own = static_cast<char*>(peers.staging[rank]) + half;
  for (int64_t r = b; r < rows; r += gridDim.x) {
    for (int64_t p = threadIdx.x; p < row_packs; p += blockDim.x) {
      reinterpret_cast<uint4*>(own)[r * row_packs + p] = load_pack<T, kVector>(x, r * row_packs + p);
    }
  }
  rank_barrier(peers, rank, world, epoch + 1);

  const char* src[kWorld != 0 ? kWorld : kOneShotMaxRanks];
  staging_sources(peers, world, half, src);
  for (int64_t r = b; r < rows; r += gridDim.x) {
    float sum_sq = 0.0f;
    for (int64_t p = threadIdx.x; p < row_packs; p += blockDim.x) {
      const int64_t i = r * row_packs + p;
      float acc[kElems], stream[kElems];
      sum_pack<T, kWorld>(src, world, i, acc);
      Pack<T>::unpack(Pack<T>::pack(acc), acc);  // x as all_reduce_sum stores it
      Pack<T>::unpack(load_pack<T, kVector>(residual, i), stream);
#pragma unroll
      for (int e = 0; e < kElems; ++e) stream[e] = add_rn(stream[e], acc[e]);
      const uint4 stored = Pack<T>::pack(stream);
      store_pack<T, kVector>(residual, i, stored);
      Pack<T>::unpack(stored, stream);
#pragma unroll
      for (int e = 0; e < kElems; ++e) sum_sq += stream[e] * stream[e];
    }
    const float inv_rms = rsqrtf(block_sum(sum_sq, shared) / static_cast<float>(cols) + eps);
    for (int64_t p = threadIdx.x; p < row_packs; p += blockDim.x) {
      const int64_t i = r * row_packs + p;
      float v[kElems], wv[kElems];
      Pack<T>::unpack(load_pack<T, kVector>(residual, i), v);  // this thread's own store above
      Pack<T>::unpack(load_pack<T, kVector>(w, p), wv);
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        // An offset of 0 multiplies by w itself, as rms_norm_kernel does.
        const float wi = weight_offset == 0.0f ? wv[e] : weight_offset + wv[e];
        v[e] = v[e] * inv_rms * wi;
      }
      store_pack<T, kVector>(out, i, Pack<T>::pack(v));
    }
  }
  if (threadIdx.x == 0) epochs[b] = epoch + 1;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int kWorld>
gpuError_t launch_world(T* x, int64_t n, int rank, int world, const OneShotPeers& peers,
                        size_t capacity, uint32_t* epochs, int blocks, gpuStream_t stream) {
  const bool vector = aligned16(x);
  return launch(vector ? one_shot_kernel<T, kWorld, true> : one_shot_kernel<T, kWorld, false>,
                dim3(blocks), dim3(kThreads), 0, stream, x, n, rank, world, peers, capacity, epochs);
}

template <typename T, int kWorld>
gpuError_t launch_fused(const T* x, int64_t rows, int64_t cols, T* residual, const T* w, float eps,
                        float weight_offset, T* out, int rank, int world, const OneShotPeers& peers,
                        size_t capacity, uint32_t* epochs, int blocks, gpuStream_t stream) {
  const bool vector = aligned16(x) && aligned16(residual) && aligned16(w) && aligned16(out);
  return launch(vector ? one_shot_add_rms_norm_kernel<T, kWorld, true>
                       : one_shot_add_rms_norm_kernel<T, kWorld, false>,
                dim3(blocks), dim3(kThreads), 0, stream, x, rows, cols, residual, w, eps,
                weight_offset, out, rank, world, peers, capacity, epochs);
}

}  // namespace

template <typename T>
gpuError_t one_shot_all_reduce(T* x, int64_t n, int rank, int world, const OneShotPeers& peers,
                               size_t capacity, uint32_t* epochs, int blocks, gpuStream_t stream) {
  if (world < 2 || world > kOneShotMaxRanks || rank < 0 || rank >= world || blocks < 1 ||
      blocks > kOneShotMaxBlocks || n < 0 || static_cast<size_t>(n) * sizeof(T) > capacity) {
    return gpuErrorInvalidValue;
  }
  switch (world) {
    case 2:
      return launch_world<T, 2>(x, n, rank, world, peers, capacity, epochs, blocks, stream);
    case 4:
      return launch_world<T, 4>(x, n, rank, world, peers, capacity, epochs, blocks, stream);
    case 8:
      return launch_world<T, 8>(x, n, rank, world, peers, capacity, epochs, blocks, stream);
    default:
      return launch_world<T, 0>(x, n, rank, world, peers, capacity, epochs, blocks, stream);
  }
}

template <typename T>
bool one_shot_add_rms_norm_fits(int64_t rows, int64_t cols, size_t capacity) {
  return rows >= 0 && cols > 0 && cols % Pack<T>::kElems == 0 &&
         static_cast<size_t>(rows) * static_cast<size_t>(cols) * sizeof(T) <= capacity;
}

template <typename T>
gpuError_t one_shot_all_reduce_add_rms_norm(const T* x, int64_t rows, int64_t cols, T* residual,
                                            const T* w, float eps, float weight_offset, T* out,
                                            int rank, int world, const OneShotPeers& peers,
                                            size_t capacity, uint32_t* epochs, int blocks,
                                            gpuStream_t stream) {
  if (world < 2 || world > kOneShotMaxRanks || rank < 0 || rank >= world || blocks < 1 ||
      blocks > kOneShotMaxBlocks ||
      !one_shot_add_rms_norm_fits<T>(rows, cols, capacity)) {
    return gpuErrorInvalidValue;
  }
  switch (world) {
    case 2:
      return launch_fused<T, 2>(x, rows, cols, residual, w, eps, weight_offset, out, rank, world,
                                peers, capacity, epochs, blocks, stream);
    case 4:
      return launch_fused<T, 4>(x, rows, cols, residual, w, eps, weight_offset, out, rank, world,
                                peers, capacity, epochs, blocks, stream);
    case 8:
      return launch_fused<T, 8>(x, rows, cols, residual, w, eps, weight_offset, out, rank, world,
                                peers, capacity, epochs, blocks, stream);
    default:
      return launch_fused<T, 0>(x, rows, cols, residual, w, eps, weight_offset, out, rank, world,
                                peers, capacity, epochs, blocks, stream);
  }
}

#define TESSERA_ONE_SHOT_FUSED(T)                                                                \
  template bool one_shot_add_rms_norm_fits<T>(int64_t, int64_t, size_t);                        \
  template gpuError_t one_shot_all_reduce_add_rms_norm(const T*, int64_t, int64_t, T*, const T*, \
                                                       float, float, T*, int, int,               \
                                                       const OneShotPeers&, size_t, uint32_t*,   \
                                                       int, gpuStream_t);
TESSERA_FOR_EACH_ELEMENT_TYPE(TESSERA_ONE_SHOT_FUSED)
#undef TESSERA_ONE_SHOT_FUSED

template gpuError_t one_shot_all_reduce<gpu_bf16>(gpu_bf16*, int64_t, int, int, const OneShotPeers&,
                                                  size_t, uint32_t*, int, gpuStream_t);
template gpuError_t one_shot_all_reduce<gpu_f16>(gpu_f16*, int64_t, int, int, const OneShotPeers&,
                                                 size_t, uint32_t*, int, gpuStream_t);
template gpuError_t one_shot_all_reduce<float>(float*, int64_t, int, int, const OneShotPeers&,
                                               size_t, uint32_t*, int, gpuStream_t);

}  // namespace tessera::gpu
