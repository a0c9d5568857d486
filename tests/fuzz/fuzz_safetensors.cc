// libFuzzer target: SafetensorsFile and the fp32 conversion of every tensor of modest size.
#include <cstdint>
#include <vector>

#include "runtime/model_io/dequant.h"
#include "runtime/model_io/safetensors_file.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string path = fuzz::write_input_file("st", ".safetensors", data, size);
  if (path.empty()) return 0;
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(path);
  if (!f.ok()) return 0;
  std::vector<float> buf;
  for (const SafetensorsTensor& t : (*f)->tensors()) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n > fuzz::kMaxConvertElements) continue;
    buf.resize(static_cast<size_t>(n));
    (void)dequantize_f32(t.dtype, (*f)->tensor_bytes(t), buf);
    (void)(*f)->find(t.name);
  }
  return 0;
}
