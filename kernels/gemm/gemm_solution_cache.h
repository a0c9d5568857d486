// What GpuBackend::linear runs for each GEMM when a tuning context is attached: the context's
// solution name for the signature, resolved once (parse + library check) and kept until the
// context's version moves; where the context has none, the untuned solution. A name that does not
// resolve (unknown, unparseable, rejected for the shape) runs Default, with one warning naming
// the solution and the reason. Without a context, untuned() resolves Gemm::untuned_solution once
// per signature.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "kernels/gemm/gpu_gemm.h"
#include "runtime/backend.h"

namespace tessera::gpu {

class GemmSolutionCache {
 public:
  // The solution for `shape`; asks `source` only for signatures not resolved since its version
  // last moved. The reference stays valid until the next call.
  const Gemm::Solution& solution(Gemm& gemm, GemmSolutionSource& source, const GemmShape& shape);
  // The untuned solution for `shape` (Default unless Gemm::untuned_solution names another that
  // resolves).
  const Gemm::Solution& untuned(Gemm& gemm, const GemmShape& shape);

 private:
  void sync_version(const GemmSolutionSource& source);

  std::map<GemmSignature, Gemm::Solution> resolved_;
  std::map<GemmSignature, Gemm::Solution> untuned_;
  uint64_t version_ = 0;
  bool has_version_ = false;
  std::set<std::string> warned_;  // solution names already warned about
};

}  // namespace tessera::gpu
