// The BLAS library's algorithms for one GEMM shape as tuning candidates, each named so that the
// name alone re-creates it in a later process (the tuning results file stores names):
//
//   cuBLASLt   "lt_algo{id}_tile{t}_stages{s}_splitk{k}_red{r}_swz{w}_cust{c}_inner{i}_cluster{l}"
//              every configuration attribute of a cublasLtMatmulAlgo_t: cublasLtMatmulAlgoInit(id)
//              plus cublasLtMatmulAlgoConfigSetAttribute rebuild it.
//   hipBLASLt  "hipblaslt_sol{index}", the library's solution index.
//
// A rebuilt algorithm is checked again by the library for the shape (and its workspace against
// the limit) before it is used.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gemm/gemm_shape.h"

namespace tessera::gpu {

// Where a candidate comes from (tests and benchmarks report it; the tuner needs only names).
enum class CandidateOrigin { kDefault, kHeuristic, kEnumerated, kOwn };

// A library algorithm checked for one shape.
struct BlasAlgo {
  std::string name;
  // The cublasLtMatmulAlgo_t / hipblasLtMatmulAlgo_t, opaque here so that this header needs no
  // vendor header.
  alignas(16) std::array<unsigned char, 128> storage{};
  uint32_t min_alignment = 256;  // bytes every operand pointer must be aligned to
};

// True for names of the build's library ("lt_..." / "hipblaslt_...").
bool is_blaslt_name(std::string_view name);

// The library heuristic's list for `shape` (asking for many results), then, on cuBLASLt, other
// configurations enumerated from each algorithm's capabilities (tiles, stages, split-K counts and
// reduction schemes, CTA swizzle), within fixed bounds so that a shape takes well under a second.
// Only algorithms that pass the library's check, with a workspace of at most `workspace_bytes`
// and a name that rebuilds them, are listed; names are unique. `handle` is the library handle.
// `scale_placeholder`: a device address for a row-wise FP8 shape's descriptors (see
// MatmulDescriptors::create).
absl::StatusOr<std::vector<std::pair<std::string, CandidateOrigin>>> blaslt_candidates(
    void* handle, const GemmShape& shape, size_t workspace_bytes, const void* scale_placeholder);

// Rebuilds the algorithm `name` for `shape`: InvalidArgument when the name does not parse,
// NotFound when the library rejects it for the shape or its workspace exceeds the limit.
absl::StatusOr<BlasAlgo> blaslt_algo(void* handle, const GemmShape& shape, std::string_view name,
                                     size_t workspace_bytes, const void* scale_placeholder);

// The name of `algo`, read back from the algorithm itself (its configuration attributes, or its
// solution index): equal to algo.name for an algorithm that blaslt_algo() rebuilt faithfully.
absl::StatusOr<std::string> blaslt_name_of(const BlasAlgo& algo);

}  // namespace tessera::gpu
