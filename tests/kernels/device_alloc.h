// Raw device memory for kernel tests that call the kernels directly (no backend): freed on scope
// exit, a failed allocation a test failure.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <vector>

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

// `bytes` of host `src` in a fresh allocation, the copy finished: a copy from pageable memory may
// return before its DMA is done, and the kernels run on non-blocking streams that do not wait for
// it.
inline DevicePtr device_upload(const void* src, size_t bytes) {
  DevicePtr p = device_alloc(bytes);
  EXPECT_EQ(gpuMemcpy(p.get(), src, bytes, gpuMemcpyHostToDevice), gpuSuccess);
  EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
  return p;
}

template <typename V>
DevicePtr device_upload(const std::vector<V>& host) {
  return device_upload(host.data(), host.size() * sizeof(V));
}

}  // namespace tessera
