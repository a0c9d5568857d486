// A whole file mapped read-only into memory, unmapped when the object dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace tessera {

class MappedFile {
 public:
  // Maps a regular file. Errors (missing, not a regular file, mmap failure) name the path and the
  // errno text. An empty file maps to an empty span.
  static absl::StatusOr<std::unique_ptr<MappedFile>> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size);

  std::string path_;
  const uint8_t* data_;  // [size_] bytes, nullptr when empty
  size_t size_;
};

}  // namespace tessera
