#include "runtime/runner/tensor_arena.h"

namespace tessera {

absl::StatusOr<Tensor> TensorArena::allocate(Backend& backend, DType dtype,
                                             std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  absl::StatusOr<DeviceBuffer> buffer = backend.allocate(t.nbytes());
  if (!buffer.ok()) return buffer.status();
  t.data = buffer->data();
  buffers_.push_back(*std::move(buffer));
  return t;
}

}  // namespace tessera
