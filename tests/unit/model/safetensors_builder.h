// Test helper: a .safetensors file built entry by entry (data laid out back to back), for tests
// that write checkpoints of their own (readers' refusals, FP8 weights, whole FP8 models).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/half.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera::testing {

class SafetensorsBuilder {
 public:
  SafetensorsBuilder& tensor(const std::string& name, const std::string& dtype,
                             const std::string& shape_json, const std::string& bytes) {
    add_entry(name, dtype, shape_json, data_.size(), data_.size() + bytes.size());
    data_ += bytes;
    return *this;
  }
  SafetensorsBuilder& tensor(const std::string& name, const std::string& dtype,
                             const std::vector<int64_t>& shape, const void* data, size_t nbytes) {
    std::string shape_json = "[";
    for (size_t i = 0; i < shape.size(); ++i) shape_json += (i ? "," : "") + std::to_string(shape[i]);
    return tensor(name, dtype, shape_json + "]",
                  std::string(static_cast<const char*>(data), nbytes));
  }
  // An entry with explicit offsets and no data of its own.
  SafetensorsBuilder& add_entry(const std::string& name, const std::string& dtype,
                                const std::string& shape_json, uint64_t begin, uint64_t end) {
    if (!entries_.empty()) entries_ += ",";
    entries_ += "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape_json +
                ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
    return *this;
  }
  SafetensorsBuilder& raw_entry(const std::string& json) {
    if (!entries_.empty()) entries_ += ",";
    entries_ += json;
    return *this;
  }
  std::string header() const {
    return "{\"__metadata__\":{\"format\":\"pt\"}" + std::string(entries_.empty() ? "" : ",") +
           entries_ + "}";
  }
  std::string build() const { return with_header(header()); }
  std::string with_header(const std::string& h) const {
    std::string s;
    put_u64(s, h.size());
    return s + h + data_;
  }

 private:
  std::string entries_;
  std::string data_;
};

// Little-endian fp16 / bf16 bytes of `v` (as safetensors stores F16 / BF16).
inline std::string f16_bytes(const std::vector<float>& v) {
  std::string s;
  for (float x : v) put_le<uint16_t>(s, float_to_half(x));
  return s;
}
inline std::string bf16_bytes(const std::vector<float>& v) {
  std::string s;
  for (float x : v) put_le<uint16_t>(s, float_to_bf16(x));
  return s;
}

}  // namespace tessera::testing
