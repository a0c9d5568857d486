// One .safetensors file, memory-mapped: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the data.
//
// open() validates everything a hostile file could lie about (header length against the file
// size, dtype, shape, offsets inside the data section and consistent with shape * dtype size, no
// two tensors sharing bytes), so tensor_bytes() never reads outside the file. Errors name the file
// and the tensor (both tensors, for shared bytes).
#pragma once

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

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;   // F32, F16, BF16, F8_E4M3, F8_E5M2: others are rejected by open()
  std::vector<int64_t> shape;  // PyTorch order, outermost first; [] is a scalar
  uint64_t begin = 0;          // byte offset inside the data section
  uint64_t nbytes = 0;
};

class SafetensorsFile {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // sorted by name
  const SafetensorsTensor* find(std::string_view name) const;
  // The tensor's bytes: [nbytes], inside the file by construction; may be unaligned.
  std::span<const uint8_t> tensor_bytes(const SafetensorsTensor& t) const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  uint64_t data_start_ = 0;  // file offset of the data section (8 + header length)
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> tensors_ index
};

}  // namespace tessera
