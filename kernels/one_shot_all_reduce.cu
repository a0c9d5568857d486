// The one-shot all-reduce (see one_shot_all_reduce.h): one kernel per op and rank. Block b of
// every rank handles the same elements (a grid-stride loop over 16-byte packs, then the scalar
// tail), so its barrier needs only block b of the other ranks: it writes its epoch + 1 into its
// slot on every rank and waits for every rank's slot on its own to reach it.
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/one_shot_all_reduce.h"

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

// kWorld: the number of ranks when known at compile time (2, 4, 8: the loads of every rank in
// flight together), 0 for any other (`world` then).
template <typename T, int kWorld, bool kVector>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(T* x, int64_t n, int rank, int world, OneShotPeers peers, size_t capacity,
                    uint32_t* epochs) {
  if constexpr (kWorld != 0) world = kWorld;
  __shared__ uint32_t epoch_shared;
  const int b = blockIdx.x;
  if (threadIdx.x == 0) epoch_shared = epochs[b];
  __syncthreads();
  const uint32_t epoch = epoch_shared;
  const size_t half = (epoch & 1u) * capacity;
  constexpr int kElems = Pack<T>::kElems;
  const int64_t packs = kVector ? n / kElems : 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(b) * blockDim.x + threadIdx.x;

  // 1. This rank's x into its staging half.
  char* own = static_cast<char*>(peers.staging[rank]) + half;
  for (int64_t p = first; p < packs; p += stride) {
    reinterpret_cast<uint4*>(own)[p] = reinterpret_cast<const uint4*>(x)[p];
  }
  for (int64_t i = packs * kElems + first; i < n; i += stride) reinterpret_cast<T*>(own)[i] = x[i];

  // 2. Block b's barrier over the ranks. The block's writes are ordered before the flag by
  // __syncthreads and the signalling thread's system-scope fence; the waiting thread's fence
  // orders the flag before the reads that follow the second __syncthreads.
  __syncthreads();
  if (threadIdx.x < world) {
    const uint32_t target = epoch + 1;
    __threadfence_system();
    volatile uint32_t* to = peers.flags[threadIdx.x] + rank * kOneShotMaxBlocks + b;
    *to = target;
    volatile uint32_t* from = peers.flags[rank] + threadIdx.x * kOneShotMaxBlocks + b;
    // A peer may already be one op further (its flag then reads target + 1): not less is enough.
    while (static_cast<int32_t>(*from - target) < 0) {
    }
    __threadfence_system();
  }
  __syncthreads();

  // 3. The sum in rank order, the same on every rank.
  constexpr int kSlots = kWorld != 0 ? kWorld : kOneShotMaxRanks;
  const char* src[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s) {
    src[s] = s < world ? static_cast<const char*>(peers.staging[s]) + half : nullptr;
  }
  for (int64_t p = first; p < packs; p += stride) {
    uint4 v[kWorld != 0 ? kWorld : 1];
    float acc[kElems], part[kElems];
    if constexpr (kWorld != 0) {
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
    reinterpret_cast<uint4*>(x)[p] = Pack<T>::pack(acc);
  }
  for (int64_t i = packs * kElems + first; i < n; i += stride) {
    float acc = to_float(reinterpret_cast<const T*>(src[0])[i]);
    for (int s = 1; s < world; ++s) acc = add_rn(acc, to_float(reinterpret_cast<const T*>(src[s])[i]));
    x[i] = from_float<T>(acc);
  }
  if (threadIdx.x == 0) epochs[b] = epoch + 1;
}

template <typename T, int kWorld>
gpuError_t launch_world(T* x, int64_t n, int rank, int world, const OneShotPeers& peers,
                        size_t capacity, uint32_t* epochs, int blocks, gpuStream_t stream) {
  const bool vector = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (vector) {
    one_shot_kernel<T, kWorld, true>
        <<<blocks, kThreads, 0, stream>>>(x, n, rank, world, peers, capacity, epochs);
  } else {
    one_shot_kernel<T, kWorld, false>
        <<<blocks, kThreads, 0, stream>>>(x, n, rank, world, peers, capacity, epochs);
  }
  return gpuGetLastError();
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

template gpuError_t one_shot_all_reduce<gpu_bf16>(gpu_bf16*, int64_t, int, int, const OneShotPeers&,
                                                  size_t, uint32_t*, int, gpuStream_t);
template gpuError_t one_shot_all_reduce<gpu_f16>(gpu_f16*, int64_t, int, int, const OneShotPeers&,
                                                 size_t, uint32_t*, int, gpuStream_t);
template gpuError_t one_shot_all_reduce<float>(float*, int64_t, int, int, const OneShotPeers&,
                                               size_t, uint32_t*, int, gpuStream_t);

}  // namespace tessera::gpu
