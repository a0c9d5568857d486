#include "runtime/model_io/tensor_checks.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "base/str_cat.h"

namespace tessera {

std::string shape_string(std::span<const int64_t> shape) {
  return str_cat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status check_read_f32_request(std::string_view where, std::span<const int64_t> shape,
                                    std::span<const int64_t> expected, size_t out_size) {
  if (!std::equal(shape.begin(), shape.end(), expected.begin(), expected.end())) {
    return absl::InvalidArgumentError(str_cat(where, ": shape ", shape_string(shape),
                                              " does not match the expected shape ",
                                              shape_string(expected)));
  }
  // The stored shape was validated against the file size, so this product cannot overflow.
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  if (n != out_size) {
    return absl::InvalidArgumentError(str_cat(where, ": output buffer holds ", out_size,
                                              " floats but the tensor has ", n, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace tessera
