// The one-shot all-reduce over peer memory (one_shot_all_reduce.cu), for the small messages of a
// decode step where a ring's latency dominates: every rank copies its x into its own staging
// buffer, waits at a barrier of flags in peer memory, then reads every rank's staging buffer and
// sums them in rank order (fp32), so that every rank writes the same bits back into its x.
//
// Each rank owns, in its own device memory: staging (2 * capacity bytes: two halves, used
// alternately), flags (kOneShotMaxRanks * kOneShotMaxBlocks uint32, zeroed at creation; slot
// [s][b] is written only by rank s's block b) and epochs (kOneShotMaxBlocks uint32, zeroed: how
// many ops each block has done). A launch's arguments never change between ops of the same
// shape: the epochs advance in device memory, so a launch recorded into a graph stays right when
// replayed. Every rank launches every op with the same grid (`blocks`, fixed for the group), so
// every block's epoch is the same on every rank.
//
// Why two halves suffice: op k uses half k % 2. A rank overwrites a half (op k + 2) only after
// its blocks passed op k + 1's barrier, which every other rank reaches only once its op k kernel
// -- the last reader of that half -- has finished (stream order).
//
// The fused form (one_shot_all_reduce_add_rms_norm) runs the residual add and RMSNorm that follow
// the all-reduce in a tensor-parallel layer in the same kernel, reading the peers' rows once; it
// shares the staging, flags and epochs (and so the grid) with the plain one.
//
// The barrier spins: every rank's op must be queued, and each rank's blocks must be resident
// together (blocks <= the SM count); on CUDA a peer missing for 2 minutes makes the kernel trap
// (the step then fails with a launch error) rather than wait for ever. Launched overlapping the
// previous kernel (launch.h): the wait for it comes first, so the launch's latency is hidden, not
// the work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gpu.h"

namespace tessera::gpu {

inline constexpr int kOneShotMaxRanks = 8;
inline constexpr int kOneShotMaxBlocks = 64;

// Every rank's buffers, as this rank's kernels address them (peer access enabled both ways).
struct OneShotPeers {
  void* staging[kOneShotMaxRanks] = {};
  uint32_t* flags[kOneShotMaxRanks] = {};
};

// x[0, n) = the sum over the `world` ranks of their x, in place; n * sizeof(T) <= capacity.
// T: gpu_bf16, gpu_f16 or float. `epochs`: this rank's. `blocks` <= kOneShotMaxBlocks.
template <typename T>
gpuError_t one_shot_all_reduce(T* x, int64_t n, int rank, int world, const OneShotPeers& peers,
                               size_t capacity, uint32_t* epochs, int blocks, gpuStream_t stream);

// residual += the sum over the ranks of x; out = rms_norm(residual) * (w + weight_offset) (0: w
// itself), as all_reduce_sum then the backend's add_rms_norm compute it, rounding alike (the
// norm's sum of squares is added in another order). x, residual, out [rows, cols], w [cols];
// x is left as it was. T: gpu_bf16 or gpu_f16. Only where one_shot_add_rms_norm_fits, which
// looks at the shape alone (cols a multiple of 8, rows * cols * sizeof(T) <= capacity), so every
// rank answers alike; tensors that are not 16-byte aligned are read element by element, over
// the same split of the rows.
template <typename T>
bool one_shot_add_rms_norm_fits(int64_t rows, int64_t cols, size_t capacity);
template <typename T>
gpuError_t one_shot_all_reduce_add_rms_norm(const T* x, int64_t rows, int64_t cols, T* residual,
                                            const T* w, float eps, float weight_offset, T* out,
                                            int rank, int world, const OneShotPeers& peers,
                                            size_t capacity, uint32_t* epochs, int blocks,
                                            gpuStream_t stream);

}  // namespace tessera::gpu
