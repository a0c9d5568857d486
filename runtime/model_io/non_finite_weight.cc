// non_finite_weight_error (declared in weight_source.h, which kernels see through the backend
// seam): the one wording of "this weight is not finite" for the host and the GPU conversions.
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/str_cat.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_weights.h"
#include "runtime/model_io/tensor_checks.h"
#include "runtime/model_io/weight_source.h"

namespace tessera {
namespace {

// The stored value of `element` in fp32 (its block dequantized on its own), or an error when the
// tensor's bytes cannot be decoded here.
absl::StatusOr<float> stored_value(const RawTensor& t, int64_t element) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(t.info.dtype));
  if (traits == nullptr) return absl::InvalidArgumentError("unknown dtype");
  const int64_t block = element / static_cast<int64_t>(traits->block_elems);
  const size_t offset = static_cast<size_t>(block) * traits->block_bytes;
  if (t.data == nullptr || offset + traits->block_bytes > t.nbytes) {
    return absl::OutOfRangeError("element outside the stored bytes");
  }
  std::vector<float> values(traits->block_elems);
  if (absl::Status st = dequantize_f32(t.info.dtype, {t.data + offset, traits->block_bytes}, values);
      !st.ok()) {
    return st;
  }
  const float stored = values[static_cast<size_t>(element) % traits->block_elems];
  if (!t.scales.scaled()) return stored;
  // The value read_f32 made of it: times the element's scale (FP8 checkpoints).
  const std::vector<int64_t>& shape = t.info.shape;
  const int64_t row_elems = shape.size() == 2 ? shape[1] : 0;
  return row_elems > 0 ? stored * t.scales.at(element / row_elems, element % row_elems)
                       : stored * t.scales.at(element, 0);
}

std::string describe_value(const absl::StatusOr<float>& value, DType converted_to) {
  if (!value.ok()) return str_cat("not finite once converted to ", dtype_name(converted_to));
  if (std::isnan(*value)) return "NaN";
  if (std::isinf(*value)) return *value > 0 ? "+inf" : "-inf";
  return str_cat(*value, ", which overflows ", dtype_name(converted_to), " to inf");
}

}  // namespace

absl::Status non_finite_weight_error(std::string_view where, const RawTensor& tensor,
                                     int64_t element, DType converted_to) {
  const std::vector<int64_t>& shape = tensor.info.shape;
  std::string position;
  if (shape.size() >= 2 && shape[0] > 0) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t row_elems = numel / shape[0];
    const int64_t row = element / row_elems;
    position = str_cat(" (row ", row, ", column ", element % row_elems);
    if (tensor.qk_permuted && tensor.qk_head_dim > 0) {
      position += str_cat(" as stored; HF row ", qk_unpermuted_row(row, tensor.qk_head_dim));
    }
    position += ")";
  }
  return absl::InvalidArgumentError(
      str_cat(where, ": element ", element, position, " of ", dtype_name(tensor.info.dtype),
              " tensor ", shape_string(shape),
              tensor.scales.scaled() ? str_cat(" with ", tensor.scales.describe()) : "", " is ",
              describe_value(stored_value(tensor, element), converted_to),
              ": the weights are corrupt (a model must load with every weight finite)"));
}

}  // namespace tessera
