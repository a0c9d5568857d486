#include "runtime/model_io/weight_scales.h"

#include "base/str_cat.h"

namespace tessera {

std::string WeightScales::describe() const {
  switch (kind) {
    case Kind::kNone:
      return "no scales";
    case Kind::kTensor:
      return str_cat("per-tensor scale '", name, "'");
    case Kind::kRow:
      return str_cat("per-row scales '", name, "'");
    case Kind::kBlock:
      return str_cat(block_rows, "x", block_cols, "-block scales '", name, "'");
  }
  return "";
}

}  // namespace tessera
