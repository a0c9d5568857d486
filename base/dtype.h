// Element types of stored tensors (GGUF's ggml types and safetensors' dtypes share this enum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

// Values equal GGUF's ggml_type ids so that a GGUF tensor info maps onto this enum directly.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
};

// Layout of one dtype: `block_elems` elements are stored in `block_bytes` bytes
// (1 and sizeof(element) for plain types).
struct DTypeTraits {
  std::string_view name;
  size_t block_elems;
  size_t block_bytes;
  bool dequantizable;  // this build can turn it into fp32
};

// Traits of a known dtype, or nullptr for an id this build does not know.
const DTypeTraits* dtype_traits(uint32_t id);
std::string_view dtype_name(DType t);

}  // namespace tessera
