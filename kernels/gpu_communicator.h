// The GPU Communicator (runtime/backend/communicator.h): NCCL on CUDA, RCCL on HIP, through the
// same code, plus a one-shot all-reduce over peer memory (one_shot_all_reduce.h) for the small
// messages of a decode step.
//
// The library is loaded at run time (dlopen), so that a daemon serving on one GPU needs none:
// TESSERA_NCCL_LIBRARY (a path or a name) when set, else libnccl.so.2 (CUDA) / librccl.so.1
// (HIP) from the loader's search path. The group is made with ncclCommInitAll: one process, one
// communicator per GPU, each driven from its own thread (NCCL allows concurrent calls on
// different communicators; never two threads on one rank).
//
// Ops are queued on the rank's GpuBackend stream, after the work queued there so far, and may be
// recorded into the backend's graphs (run_graph): NCCL's operations are capturable, and the
// one-shot kernel keeps its barrier's state in device memory, so replays stay in step. Every rank
// must queue every op, in the same order with the same shapes, or the others wait for ever. No
// op allocates. Do not allocate or free device memory (gpuMalloc / gpuFree, which may wait for
// the GPUs to drain) on one rank's thread while its own or another rank's collective may be
// waiting for a rank whose thread is the one blocked: allocate before the step's collectives.
//
// all_reduce_sum takes NCCL or the one-shot per message: TESSERA_ALL_REDUCE (or the options) =
//   auto      (default) the one-shot below the size where it stops beating NCCL, measured at
//             creation (4 KiB .. 1 MiB, both timed on this group); NCCL above; and
//             all_reduce_add_rms_norm fused below the size where it stops beating the all-reduce
//             then the norm kernel;
//   nccl      NCCL for every size;
//   one_shot  the one-shot for every size (in chunks of its staging buffer past that; fused up to
//             the staging buffer's size); refused
//             at creation where two of the GPUs cannot access each other's memory.
// The one-shot needs peer access between every pair of GPUs and at most 8 ranks; without it the
// group is NCCL only and describe() says why.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "runtime/backend.h"

namespace tessera {

class GpuBackend;

enum class AllReduceMode { kAuto, kNccl, kOneShot };
// "auto", "nccl", "one_shot" (also "one-shot"); InvalidArgument naming the choices otherwise.
absl::StatusOr<AllReduceMode> parse_all_reduce_mode(std::string_view text);

struct GpuCommunicatorOptions {
  // Unset: TESSERA_ALL_REDUCE, else auto.
  std::optional<AllReduceMode> all_reduce;
  // Rank 0's buffer for the other ranks' parts in gather_columns, allocated at creation (nothing
  // allocates during an op); a larger gather goes in chunks of rows. A row of the other ranks'
  // parts must fit: (size - 1) * part_cols * 4 bytes.
  size_t gather_scratch_bytes = size_t{64} << 20;
};

// One Communicator per rank, rank i bound to ranks[i] (its device, its stream); the backends
// must outlive the communicators, and every GPU must differ. A single rank needs no library: its
// all-reduce is a no-op and its gather a local copy. Errors: no library (naming what was tried
// and TESSERA_NCCL_LIBRARY), a library older than 2.10, an invalid TESSERA_ALL_REDUCE, one_shot
// asked for where a pair of GPUs has no peer access (naming the pair), NCCL's own.
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> create_gpu_communicators(
    std::span<GpuBackend* const> ranks, const GpuCommunicatorOptions& options = {});

// --- measurement (tessera bench all-reduce, and the choice at creation) ----------------------

// Microseconds per all-reduce of `bytes` (in `dtype`) through each path: ops queued back to back
// in groups of 8 between events, after a warm-up; the median group over the op count, the
// slowest rank's. nccl_norm_us and fused_us time all_reduce_add_rms_norm's two forms over rows
// of up to 4096 elements: NCCL then the residual add and norm kernel, and the fused one-shot.
// A path is < 0 where it does not run (no one-shot in the group; fp32 has no fused form).
struct AllReduceTiming {
  size_t bytes = 0;
  double nccl_us = -1;
  double one_shot_us = -1;
  double nccl_norm_us = -1;
  double fused_us = -1;
};
// Times every size on `group` (what create_gpu_communicators made, all of its ranks, in order),
// one thread per rank. The ranks' streams must be idle otherwise.
absl::StatusOr<std::vector<AllReduceTiming>> time_all_reduce(std::span<Communicator* const> group,
                                                             std::span<const size_t> sizes,
                                                             DType dtype, int iterations = 50);
// The largest message (bytes) all_reduce_sum sends through the one-shot: 0 when it never does.
size_t one_shot_limit(const Communicator& communicator);
// The largest x (bytes) all_reduce_add_rms_norm fuses: 0 when it never does.
size_t fused_limit(const Communicator& communicator);

}  // namespace tessera
