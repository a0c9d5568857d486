// A GGUF file (v2/v3, little-endian), memory-mapped and validated on open: metadata key/values
// and tensor infos are parsed; tensor data stays in the mapping.
//
// Every check a hostile file could trip is done in open(), so that the getters and
// tensor_bytes() never read outside the file: truncation, lengths and counts larger than the bytes
// left, unknown value or tensor types, bad dims, element/byte-count overflow, misaligned or
// out-of-bounds tensor offsets, tensors that share bytes, duplicate keys or tensor names. Errors
// name the file and the key or tensor (both tensors, for shared bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace tessera {

class MappedFile;

// GGUF metadata value types (gguf_type ids).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// "u8", "i32", "string", "array", ... ("unknown" for ids outside the enum).
std::string_view gguf_type_name(GgufType t);

// One metadata value. Strings and numeric array payloads point into the mapped file, so a value
// is valid while its GgufFile lives.
struct GgufValue {
  GgufType type = GgufType::kU8;
  // Scalars: unsigned integers and bool in `u`, signed integers in `i`, f32/f64 in `f`.
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string_view str;  // kString: raw bytes, not NUL-terminated

  // kArray only.
  GgufType elem_type = GgufType::kU8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;         // numeric/bool elements: [count] little-endian values
  std::vector<std::string_view> strings;  // elem_type == kString: [count]
  std::vector<GgufValue> arrays;          // elem_type == kArray: [count] nested arrays
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;  // as stored in the file, e.g. "blk.0.attn_q.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // HF order, outermost first (GGUF's ne[] reversed)
  uint64_t offset = 0;         // from the start of the data section, a multiple of alignment()
  int64_t n_elements = 0;
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  static absl::StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the tensor data section
  size_t file_size() const;

  // Metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // Typed getters. A missing key is NotFound; a value of another type is InvalidArgument naming
  // the key and the actual type. Integer getters accept any integer type whose value fits the
  // result (converters differ in which width they write); float getters accept f32 and f64.
  absl::StatusOr<std::string> get_string(std::string_view key) const;
  absl::StatusOr<bool> get_bool(std::string_view key) const;
  absl::StatusOr<uint32_t> get_u32(std::string_view key) const;
  absl::StatusOr<int32_t> get_i32(std::string_view key) const;
  absl::StatusOr<uint64_t> get_u64(std::string_view key) const;
  absl::StatusOr<int64_t> get_i64(std::string_view key) const;
  absl::StatusOr<float> get_f32(std::string_view key) const;
  absl::StatusOr<double> get_f64(std::string_view key) const;
  // Arrays: the element type must match as above (nested arrays are never accepted here).
  absl::StatusOr<std::vector<std::string>> get_string_array(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> get_int_array(std::string_view key) const;
  absl::StatusOr<std::vector<float>> get_float_array(std::string_view key) const;
  // Element count of an array value (without copying it).
  absl::StatusOr<uint64_t> get_array_size(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // by GGUF name
  // The tensor's stored bytes: [nbytes], inside the file by construction.
  std::span<const uint8_t> tensor_bytes(const GgufTensorInfo& t) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  // The value for `key`, or NotFound naming the file and the key.
  absl::StatusOr<const GgufValue*> lookup(std::string_view key) const;
  // lookup() that also requires an integer type (`want` names the getter's type for the error).
  absl::StatusOr<const GgufValue*> lookup_int(std::string_view key, std::string_view want) const;
  absl::Status type_error(std::string_view key, const GgufValue& v, std::string_view want) const;

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;  // key -> metadata_ index
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> tensors_ index
};

}  // namespace tessera
