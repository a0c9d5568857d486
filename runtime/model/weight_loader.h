// Loads a family's weights onto the backends that hold them, converting to each backend's compute
// dtype: one stored tensor, or several stacked along the first dimension into one (a fused
// weight: q/k/v, gate/up), each whole or a slice of it (a tensor-parallel rank's rows or columns,
// runtime/model_io/weight_slice.h).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/model_io/weight_slice.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/runner/tensor_arena.h"

namespace tessera {

// "model.layers.<i>.<suffix>": the HF name of a decoder layer's tensor.
std::string layer_weight_name(int64_t layer, std::string_view suffix);

// A stored tensor's share of a loaded weight: all of it, or its rows `rows` (a count of 0: every
// row) and columns `cols` (0: every column).
struct WeightPart {
  std::string name;
  IndexRange rows;
  IndexRange cols;
  bool whole() const { return rows.count == 0 && cols.count == 0; }
};

class WeightLoader {
 public:
  // Tensors are allocated in `arena`, which must outlive them.
  WeightLoader(const WeightSource& weights, TensorArena& arena) : weights_(weights), arena_(arena) {}

  // `names` stacked along the first dimension into one tensor of shape `dims` on `backend`; each
  // part takes its stored rows (q and k/v differ), and together they must fill `dims`.
  absl::StatusOr<Tensor> load(Backend& backend, std::initializer_list<std::string_view> names,
                              std::initializer_list<int64_t> dims);
  // `parts` stacked the same way; a sliced part takes its range's rows. With `zero_rest` the parts
  // may fill fewer rows than `dims` says, and the rows after them are zeros (the padding of the
  // last rank's vocabulary slice).
  absl::StatusOr<Tensor> load_parts(Backend& backend, std::initializer_list<WeightPart> parts,
                                    std::initializer_list<int64_t> dims, bool zero_rest = false);
  absl::StatusOr<Tensor> load_parts(Backend& backend, std::span<const WeightPart> parts,
                                    std::initializer_list<int64_t> dims, bool zero_rest = false);
  // Rows [first, first + count) of `name` [vocab, cols] followed by zero rows up to `rows` (a
  // tensor-parallel rank's vocabulary slice, the last ranks' padded past the vocabulary; count
  // may be 0, where the slice is padding only).
  absl::StatusOr<Tensor> load_row_slice(Backend& backend, std::string name, int64_t first,
                                        int64_t count, int64_t rows, int64_t cols);
  // `parts` stacked into a [rows, cols] FP8 weight (kF8_E4M3 codes, Tensor::scale its [rows] fp32
  // row scales, both on `backend`) from the codes the checkpoint stores, as they are -- where every
  // part is stored as F8_E4M3 with a per-tensor or per-row scale; nullopt otherwise (another type,
  // block scales: load_parts and quantize). A NaN code is an error naming the tensor and element.
  // The codes are OCP e4m3fn: for a backend whose FP8 is e4m3fn (the only one that keeps FP8
  // weights today, Backend::supports).
  absl::StatusOr<std::optional<Tensor>> load_fp8_codes(Backend& backend,
                                                       std::span<const WeightPart> parts,
                                                       int64_t rows, int64_t cols);
  // Whether every part of a weight is stored in an FP8 type: an FP8 checkpoint's quantized linear
  // weights, not those its ignore list left in higher precision.
  absl::StatusOr<bool> stored_in_fp8(std::span<const WeightPart> parts) const;
  // Bytes of every tensor load() has placed.
  size_t bytes_loaded() const { return bytes_loaded_; }
  const WeightSource& weights() const { return weights_; }

 private:
  const WeightSource& weights_;
  TensorArena& arena_;
  size_t bytes_loaded_ = 0;
};

}  // namespace tessera
