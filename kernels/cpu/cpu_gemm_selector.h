// Which CPU GEMM algorithm linear() runs: the solution source's answer per shape, cached until
// the source's version() moves (asking takes a lock and a map lookup; a step runs hundreds of
// GEMMs). Used by the thread that runs the backend's ops only.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/cpu/cpu_gemm_algos.h"
#include "runtime/backend.h"

namespace tessera {

class CpuGemmSelector {
 public:
  // For out [m, n] = x [m, k] @ w [n, k]^T. A solution this backend does not know (a hand edit
  // gone wrong, a file from a GPU) is logged once and runs the default.
  cpu::GemmAlgo select(GemmSolutionSource& source, int64_t m, int64_t n, int64_t k);

 private:
  uint64_t version_ = 0;
  bool valid_ = false;
  std::map<std::tuple<int64_t, int64_t, int64_t>, cpu::GemmAlgo> cache_;
};

}  // namespace tessera
