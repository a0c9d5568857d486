// The ceiling of a weight-streaming GEMM: a kernel that only reads. At decode sizes a GEMM moves
// its weights once and does next to nothing with them, so the time to read the same bytes, timed
// the same way (back-to-back calls over buffers rotated past the L2), is what a small-M kernel
// can reach, launch and ramp included -- `tessera bench gemm` reports it beside the GEMMs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gpu.h"

namespace tessera::gpu {

// Reads `bytes` (a multiple of 16) of 16-byte aligned `data` once: two 256-thread CTAs per
// multiprocessor (the device has `multiprocessors`; asked once by the caller, not per call), each
// an equal contiguous share, every thread eight 16-byte loads in flight. The loaded words are
// folded (xor) per thread and the fold stored to `sink` (one word) only when it equals
// kStreamReadSinkValue, so that the loads cannot be dropped and nothing else is written. Launched
// overlapping the previous kernel (kernels/launch.h), as the small-M GEMMs are.
inline constexpr uint32_t kStreamReadSinkValue = 0x9e3779b9u;

gpuError_t stream_read(const void* data, size_t bytes, int multiprocessors, uint32_t* sink,
                       gpuStream_t stream);

}  // namespace tessera::gpu
