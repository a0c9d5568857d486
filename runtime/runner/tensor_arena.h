// Device tensors that live as long as their owner (a model's weights, a runner's activations):
// allocate() takes a buffer on a backend and hands back a tensor over it; the arena frees every
// buffer when it goes.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace tessera {

class TensorArena {
 public:
  // A tensor of `dims` in `dtype` on `backend`, its contents undefined.
  absl::StatusOr<Tensor> allocate(Backend& backend, DType dtype, std::initializer_list<int64_t> dims);

 private:
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace tessera
