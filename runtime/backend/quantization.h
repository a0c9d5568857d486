// How a model's decoder linear weights are stored on the device (the `quantization` key):
// as loaded (the compute dtype), or FP8 e4m3 with one fp32 scale per tensor, quantized at load.
// Embeddings, norms and lm_head stay in the compute dtype either way.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

enum class Quantization { kNone, kFp8 };

// "none" or "fp8"; InvalidArgument naming the choices otherwise.
absl::StatusOr<Quantization> parse_quantization(std::string_view text);
std::string_view quantization_name(Quantization q);

}  // namespace tessera
