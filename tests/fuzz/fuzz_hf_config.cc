// libFuzzer target: config_from_hf_json on arbitrary text (never throws, never crashes).
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/model_io/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kPath = "fuzz/config.json";
  (void)tessera::config_from_hf_json(std::string_view(reinterpret_cast<const char*>(data), size),
                                     kPath);
  return 0;
}
