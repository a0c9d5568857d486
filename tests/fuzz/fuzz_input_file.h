// Fuzz targets open files by path, so each input is first written to a per-process temp file.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessera::fuzz {

// Writes `data` to <TMPDIR or /tmp>/tessera_fuzz_<tag>_<pid><suffix> and returns the path ("" if
// the write failed). The same path is reused for every input of the process.
inline std::string write_input_file(const char* tag, const char* suffix, const uint8_t* data,
                                    size_t size) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                           "/tessera_fuzz_" + tag + "_" + std::to_string(::getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return "";
  const bool ok = size == 0 || std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !ok) return "";
  return path;
}

// Elements above this are not converted: the point is the parsers, not allocating gigabytes.
constexpr uint64_t kMaxConvertElements = uint64_t{1} << 22;

}  // namespace tessera::fuzz
