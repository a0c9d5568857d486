// The GEMM tuner's numerics check on the device: a candidate's output against the reference
// (the library default's), element-wise, without copying either to the host. For an 8B model's
// prefill GEMMs (up to 2048 x 28672 outputs) the host check copied and converted tens of millions
// of elements per candidate; this reads them once on the device and returns 8 bytes.
#pragma once

#include <cstdint>

#include "kernels/gpu.h"

namespace tessera::gpu {

// What compare_output() accumulates: the largest |x - ref| as the bits of a non-negative float
// (so that an unsigned max orders them; a NaN error is stored as +infinity), and how many
// elements are outside |x - ref| <= atol + rtol * |ref| (a NaN always is).
struct OutputCompareResult {
  uint32_t max_error_bits = 0;
  uint32_t outside = 0;
};

// Compares `count` elements of `out` with `ref`, both of the GEMM's output type: fp32 when
// `f32`, else 16-bit (`f16`: fp16, otherwise bf16). `result` (device memory) must be zeroed
// first; the kernel max-es and adds into it. Computes in fp32.
gpuError_t compare_output(const void* out, const void* ref, int64_t count, bool f32, bool f16,
                          float rtol, float atol, OutputCompareResult* result, gpuStream_t stream);

}  // namespace tessera::gpu
