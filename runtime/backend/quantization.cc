#include "runtime/backend/quantization.h"

#include "base/str_cat.h"

namespace tessera {

absl::StatusOr<Quantization> parse_quantization(std::string_view text) {
  if (text == "none" || text.empty()) return Quantization::kNone;
  if (text == "fp8") return Quantization::kFp8;
  return absl::InvalidArgumentError(
      str_cat("quantization: \"", text, "\" is not a choice: none or fp8"));
}

std::string_view quantization_name(Quantization q) {
  return q == Quantization::kFp8 ? "fp8" : "none";
}

}  // namespace tessera
