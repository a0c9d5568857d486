// A rectangle of one stored tensor, presented as a weight source holding that tensor alone: what a
// tensor-parallel rank loads -- its rows of a column-parallel weight (q/k/v, gate/up, a vocabulary
// slice), its columns of a row-parallel one (o, down). Backends load it as they load any tensor
// (Backend::load_weight), so every stored type and both conversion paths (host, device) slice
// alike.
//
// Rows are a view of the stored bytes; a column range is gathered once into bytes this source
// owns. A quantized type slices on whole blocks only, and GGUF's interleaved q/k rows on whole
// heads; anything else is an error naming the tensor and the range. An FP8 tensor's scales come
// along (RawTensor::scales, offset to the slice's first row and column): per-row scales follow
// their rows, and a 128x128 block grid is indexed from the offset, so any range slices.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model_io/weight_source.h"

namespace tessera {

// [begin, begin + count) of one dimension.
struct IndexRange {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t end() const { return begin + count; }
};

class WeightSlice final : public WeightSource {
 public:
  // Rows `rows` and columns `cols` of `name` in `base` (a 1-D tensor has no columns: `cols` must
  // then be empty). `base` must outlive the slice.
  static absl::StatusOr<std::unique_ptr<WeightSlice>> create(const WeightSource& base,
                                                             std::string_view name, IndexRange rows,
                                                             IndexRange cols);

  const ModelConfig& config() const override { return base_.config(); }
  const std::string& path() const override { return base_.path(); }
  std::vector<TensorInfo> tensors() const override { return {raw_.info}; }
  bool has(std::string_view hf_name) const override { return hf_name == raw_.info.name; }
  absl::StatusOr<RawTensor> raw(std::string_view hf_name) const override;
  absl::Status read_f32(std::string_view hf_name, std::span<const int64_t> expected_shape,
                        std::span<float> out) const override;

 private:
  WeightSlice(const WeightSource& base, std::string where) : base_(base), where_(std::move(where)) {}

  const WeightSource& base_;
  std::string where_;               // "<path>: rows [a, b) of tensor 'x'", for messages
  RawTensor raw_;                   // the slice: shape, and bytes (stored, or gathered_)
  std::vector<uint8_t> gathered_;   // a column range's bytes, row after row
};

}  // namespace tessera
