// Element types of stored tensors (GGUF's ggml types and safetensors' dtypes share this enum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

// Values below kFirstNonGgml equal GGUF's ggml_type ids, so that a GGUF tensor info maps onto
// this enum directly. Types ggml does not have (safetensors' FP8) take ids from kFirstNonGgml
// (1000) up, far past ggml's (below 64 today), so that they never collide with an id a GGUF file
// may hold; the GGUF reader refuses them (is_ggml_type).
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

  // Not ggml types (tessera's own ids).
  kF8_E4M3 = 1000,  // safetensors F8_E4M3: OCP e4m3fn (base/fp8.h)
  kF8_E5M2 = 1001,  // safetensors F8_E5M2
};

inline constexpr uint32_t kFirstNonGgml = 1000;

// Whether `id` is a ggml type id (one a GGUF file may hold), known to this build or not.
constexpr bool is_ggml_type(uint32_t id) { return id < kFirstNonGgml; }

// Whether `t` is one of the FP8 element types.
constexpr bool is_fp8(DType t) { return t == DType::kF8_E4M3 || t == DType::kF8_E5M2; }

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
