// Checks shared by the WeightSource implementations before they convert a tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera {

// "[49152, 576]".
std::string shape_string(std::span<const int64_t> shape);

// read_f32's preconditions: the stored shape equals `expected`, and `out_size` is its element
// count. `where` names the file and tensor for the message ("model.gguf: tensor 'x'").
absl::Status check_read_f32_request(std::string_view where, std::span<const int64_t> shape,
                                    std::span<const int64_t> expected, size_t out_size);

}  // namespace tessera
