// The GPU kernel test suites' backends: one GpuBackend on device 0 per fixture type and compute
// dtype, made on first use and kept for the process, so that what one suite sets on its backend
// -- a GEMM solution source, say -- never reaches another suite's tests. A fixture derived from
// another (GpuSmallMGemmTest from GpuGemmTest) shares its base's backend and must undo what it
// sets in TearDown.
#pragma once

#include <cstdio>
#include <map>

#include "kernels/gpu_backend.h"

namespace tessera {

// nullptr, after printing why, when the backend cannot be created. Callers skip first when
// GpuBackend::device_count() is 0.
template <typename Suite>
GpuBackend* suite_gpu_backend(DType dtype = DType::kBF16) {
  static std::map<DType, GpuBackend*> backends;
  auto [it, created] = backends.try_emplace(dtype, nullptr);
  if (created) {
    auto b = GpuBackend::create(0, dtype);
    if (!b.ok()) {
      std::fprintf(stderr, "GpuBackend::create: %s\n", b.status().ToString().c_str());
    } else {
      it->second = b->release();
    }
  }
  return it->second;
}

}  // namespace tessera
