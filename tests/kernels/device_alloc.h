// Raw device memory for kernel tests that call the kernels directly (no backend): freed on scope
// exit, a failed allocation a test failure.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>

#include "kernels/gpu.h"

namespace tessera {

struct GpuFree {
  void operator()(void* p) const { (void)gpuFree(p); }
};
using DevicePtr = std::unique_ptr<void, GpuFree>;

// At least one byte, so that an empty buffer still has an address.
inline DevicePtr device_alloc(size_t bytes) {
  void* p = nullptr;
  EXPECT_EQ(gpuMalloc(&p, bytes < 1 ? 1 : bytes), gpuSuccess);
  return DevicePtr(p);
}

}  // namespace tessera
