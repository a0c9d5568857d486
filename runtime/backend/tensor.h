// A non-owning view of a dense, row-major buffer on some backend's memory, and the owning
// allocation it usually points into.
#pragma once

#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "base/dtype.h"

namespace tessera {

// Bytes per element of the dense dtypes the backends compute in.
constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF8_E4M3: return 1;  // FP8 weights (e4m3 codes in the device's encoding)
    default: return 0;  // block-quantized types are never dense tensors
  }
}

struct Tensor {
  static constexpr int kMaxRank = 4;

  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};  // outermost first
  // FP8 tensors only: fp32 scales in the same backend's memory, one per row (dim 0) -- per output
  // feature of a weight, per token of an activation (written with its codes) -- that dequantize
  // them (value[r, c] = code[r, c] * scale[r]).
  float* scale = nullptr;

  Tensor() = default;
  Tensor(void* data, DType dtype, std::initializer_list<int64_t> dims) : data(data), dtype(dtype) {
    assert(dims.size() <= kMaxRank);
    for (int64_t d : dims) shape[rank++] = d;
  }

  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype); }
  // Elements per row: the product of every dimension but the first.
  int64_t row_size() const { return rank == 0 ? 1 : numel() / shape[0]; }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }

  // Rows [begin, begin + count) of this tensor, same trailing shape.
  Tensor rows(int64_t begin, int64_t count) const {
    Tensor t = *this;
    t.data = static_cast<char*>(data) + begin * row_size() * element_size(dtype);
    if (scale != nullptr) t.scale = scale + begin;  // an FP8 tensor's row scales go with its rows
    t.shape[0] = count;
    return t;
  }
};

class Backend;

// Owns bytes allocated by a backend; moves, never copies.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(owner_, o.owner_);
      std::swap(data_, o.data_);
      std::swap(bytes_, o.bytes_);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Tensor view(DType dtype, std::initializer_list<int64_t> dims) const {
    Tensor t(data_, dtype, dims);
    assert(t.nbytes() <= bytes_);
    return t;
  }
  void reset();

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tessera
