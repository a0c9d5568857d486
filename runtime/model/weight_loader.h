// Loads a family's weights onto the backends that hold them, converting to each backend's compute
// dtype: one stored tensor, or several stacked along the first dimension into one (a fused
// weight: q/k/v, gate/up).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/runner/tensor_arena.h"

namespace tessera {

// "model.layers.<i>.<suffix>": the HF name of a decoder layer's tensor.
std::string layer_weight_name(int64_t layer, std::string_view suffix);

class WeightLoader {
 public:
  // Tensors are allocated in `arena`, which must outlive them.
  WeightLoader(const WeightSource& weights, TensorArena& arena) : weights_(weights), arena_(arena) {}

  // `names` stacked along the first dimension into one tensor of shape `dims` on `backend`; each
  // part takes its stored rows (q and k/v differ), and together they must fill `dims`.
  absl::StatusOr<Tensor> load(Backend& backend, std::initializer_list<std::string_view> names,
                              std::initializer_list<int64_t> dims);
  // Bytes of every tensor load() has placed.
  size_t bytes_loaded() const { return bytes_loaded_; }

 private:
  const WeightSource& weights_;
  TensorArena& arena_;
  size_t bytes_loaded_ = 0;
};

}  // namespace tessera
