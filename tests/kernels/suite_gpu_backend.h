// The GPU kernel test suites' backend: one GpuBackend on device 0 per suite, made on first use
// and kept for the process (each suite has its own, so that what one suite sets on its backend --
// a GEMM solution source, say -- never reaches another suite's tests).
#pragma once

#include <cstdio>

#include "kernels/gpu_backend.h"

namespace tessera {

// nullptr, after printing why, when the backend cannot be created. Callers skip first when
// GpuBackend::device_count() is 0.
template <typename Suite>
GpuBackend* suite_gpu_backend() {
  static GpuBackend* backend = [] {
    auto b = GpuBackend::create(0);
    if (!b.ok()) {
      std::fprintf(stderr, "GpuBackend::create: %s\n", b.status().ToString().c_str());
      return static_cast<GpuBackend*>(nullptr);
    }
    return b->release();
  }();
  return backend;
}

}  // namespace tessera
