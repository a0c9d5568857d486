// Test helpers: copies of model files with bytes of one tensor overwritten -- a weight made NaN
// for the load-time weight check, or huge but finite to make a model's logits overflow at run
// time. Used by the CPU tests (unit_runtime, e2e) and the GPU kernel tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/model_io/gguf_file.h"
#include "runtime/model_io/safetensors_file.h"

namespace tessera::testing {

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes `bytes` over `file` at `at`; empty on success, else what went wrong.
inline std::string overwrite_and_save(std::string file, uint64_t at, std::string_view bytes,
                                      const std::string& dst) {
  if (at + bytes.size() > file.size()) return "planted bytes run past the end of the file";
  std::memcpy(file.data() + at, bytes.data(), bytes.size());
  std::ofstream out(dst, std::ios::binary | std::ios::trunc);
  out.write(file.data(), static_cast<std::streamsize>(file.size()));
  return out.good() ? "" : "cannot write " + dst;
}

// Copies GGUF `src` to `dst` with `bytes` written at byte `offset` of tensor `gguf_name`'s data
// (which must hold them). Empty on success, else what went wrong.
inline std::string plant_in_gguf(const std::string& src, const std::string& dst,
                                 std::string_view gguf_name, uint64_t offset,
                                 std::string_view bytes) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(src);
  if (!f.ok()) return f.status().ToString();
  const GgufTensorInfo* t = (*f)->find_tensor(gguf_name);
  if (t == nullptr) return src + " has no tensor " + std::string(gguf_name);
  if (offset + bytes.size() > t->nbytes) return "planted bytes run past the tensor";
  return overwrite_and_save(read_file_bytes(src), (*f)->data_offset() + t->offset + offset, bytes,
                            dst);
}

// Copies the HF directory `src_dir` (config.json, model.safetensors, tokenizer files) to
// `dst_dir` with `bytes` written at byte `offset` of tensor `name` in model.safetensors.
inline std::string plant_in_safetensors(const std::string& src_dir, const std::string& dst_dir,
                                        const std::string& name, uint64_t offset,
                                        std::string_view bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dst_dir, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(src_dir, ec)) {
    if (e.path().filename() == "model.safetensors") continue;
    fs::copy_file(e.path(), fs::path(dst_dir) / e.path().filename(),
                  fs::copy_options::overwrite_existing, ec);
    if (ec) return "cannot copy " + e.path().string() + ": " + ec.message();
  }
  const std::string src = (fs::path(src_dir) / "model.safetensors").string();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(src);
  if (!f.ok()) return f.status().ToString();
  const SafetensorsTensor* t = (*f)->find(name);
  if (t == nullptr) return src + " has no tensor " + name;
  if (offset + bytes.size() > t->nbytes) return "planted bytes run past the tensor";
  const std::string file = read_file_bytes(src);
  uint64_t header_len = 0;
  std::memcpy(&header_len, file.data(), 8);
  return overwrite_and_save(file, 8 + header_len + t->begin + offset, bytes,
                            (fs::path(dst_dir) / "model.safetensors").string());
}

// `n` copies of the float `v`'s bytes.
inline std::string float_bytes(float v, size_t n = 1) {
  std::string s(n * 4, '\0');
  for (size_t i = 0; i < n; ++i) std::memcpy(s.data() + 4 * i, &v, 4);
  return s;
}

}  // namespace tessera::testing
