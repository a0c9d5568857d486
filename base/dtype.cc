#include "base/dtype.h"

#include <array>

namespace tessera {
namespace {

// GGML block layouts (ggml-common.h). `dequantizable` must agree with what dequant.cc converts.
// Q8_1 is a matmul-side intermediate that no converter stores; it is known so that a file holding
// it is rejected by name rather than as an unknown id.
constexpr DTypeTraits kF32{"F32", 1, 4, true};
constexpr DTypeTraits kF16{"F16", 1, 2, true};
constexpr DTypeTraits kQ4_0{"Q4_0", 32, 2 + 16, true};
constexpr DTypeTraits kQ4_1{"Q4_1", 32, 2 + 2 + 16, true};
constexpr DTypeTraits kQ5_0{"Q5_0", 32, 2 + 4 + 16, true};
constexpr DTypeTraits kQ5_1{"Q5_1", 32, 2 + 2 + 4 + 16, true};
constexpr DTypeTraits kQ8_0{"Q8_0", 32, 2 + 32, true};
constexpr DTypeTraits kQ8_1{"Q8_1", 32, 2 + 2 + 32, false};
constexpr DTypeTraits kQ2_K{"Q2_K", 256, 256 / 16 + 256 / 4 + 2 + 2, true};
constexpr DTypeTraits kQ3_K{"Q3_K", 256, 256 / 8 + 256 / 4 + 12 + 2, true};
constexpr DTypeTraits kQ4_K{"Q4_K", 256, 2 + 2 + 12 + 256 / 2, true};
constexpr DTypeTraits kQ5_K{"Q5_K", 256, 2 + 2 + 12 + 256 / 8 + 256 / 2, true};
constexpr DTypeTraits kQ6_K{"Q6_K", 256, 256 / 2 + 256 / 4 + 256 / 16 + 2, true};
constexpr DTypeTraits kQ8_K{"Q8_K", 256, 4 + 256 + 2 * 256 / 16, true};
constexpr DTypeTraits kI8{"I8", 1, 1, true};
constexpr DTypeTraits kI16{"I16", 1, 2, true};
constexpr DTypeTraits kI32{"I32", 1, 4, true};
constexpr DTypeTraits kI64{"I64", 1, 8, true};
constexpr DTypeTraits kF64{"F64", 1, 8, true};
constexpr DTypeTraits kBF16{"BF16", 1, 2, true};
constexpr DTypeTraits kF8_E4M3{"F8_E4M3", 1, 1, true};
constexpr DTypeTraits kF8_E5M2{"F8_E5M2", 1, 1, true};

}  // namespace

const DTypeTraits* dtype_traits(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::kF32:
      return &kF32;
    case DType::kF16:
      return &kF16;
    case DType::kQ4_0:
      return &kQ4_0;
    case DType::kQ4_1:
      return &kQ4_1;
    case DType::kQ5_0:
      return &kQ5_0;
    case DType::kQ5_1:
      return &kQ5_1;
    case DType::kQ8_0:
      return &kQ8_0;
    case DType::kQ8_1:
      return &kQ8_1;
    case DType::kQ2_K:
      return &kQ2_K;
    case DType::kQ3_K:
      return &kQ3_K;
    case DType::kQ4_K:
      return &kQ4_K;
    case DType::kQ5_K:
      return &kQ5_K;
    case DType::kQ6_K:
      return &kQ6_K;
    case DType::kQ8_K:
      return &kQ8_K;
    case DType::kI8:
      return &kI8;
    case DType::kI16:
      return &kI16;
    case DType::kI32:
      return &kI32;
    case DType::kI64:
      return &kI64;
    case DType::kF64:
      return &kF64;
    case DType::kBF16:
      return &kBF16;
    case DType::kF8_E4M3:
      return &kF8_E4M3;
    case DType::kF8_E5M2:
      return &kF8_E5M2;
  }
  return nullptr;
}

std::string_view dtype_name(DType t) {
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(t));
  return traits != nullptr ? traits->name : std::string_view("unknown");
}

}  // namespace tessera
