// libFuzzer target: GgufFile, its typed getters, config_from_gguf, vocab_from_gguf, and
// GgufWeights::read_f32 on every tensor of modest size.
#include <cstdint>
#include <vector>

#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_config.h"
#include "runtime/model_io/gguf_file.h"
#include "runtime/model_io/gguf_weights.h"
#include "runtime/tokenizer/vocab.h"
#include "tests/fuzz/fuzz_input_file.h"

namespace {

using namespace tessera;

void touch_metadata(const GgufFile& f) {
  for (const GgufKeyValue& kv : f.metadata()) {
    (void)f.get_string(kv.key);
    (void)f.get_bool(kv.key);
    (void)f.get_u32(kv.key);
    (void)f.get_i32(kv.key);
    (void)f.get_u64(kv.key);
    (void)f.get_i64(kv.key);
    (void)f.get_f32(kv.key);
    (void)f.get_array_size(kv.key);
    (void)f.get_string_array(kv.key);
    (void)f.get_int_array(kv.key);
    (void)f.get_float_array(kv.key);
  }
}

void convert_tensors(const GgufFile& f) {
  std::vector<float> buf;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (static_cast<uint64_t>(t.n_elements) > fuzz::kMaxConvertElements) continue;
    buf.resize(static_cast<size_t>(t.n_elements));
    (void)dequantize_f32(t.dtype, f.tensor_bytes(t), buf);
  }
}

void read_weights(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufWeights>> w = GgufWeights::open(path);
  if (!w.ok()) return;
  std::vector<float> buf;
  for (const TensorInfo& t : (*w)->tensors()) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (n > fuzz::kMaxConvertElements) continue;
    buf.resize(static_cast<size_t>(n));
    (void)(*w)->read_f32(t.name, t.shape, buf);
    (void)(*w)->raw(t.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input_file("gguf", ".gguf", data, size);
  if (path.empty()) return 0;
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(path);
  if (!f.ok()) return 0;
  touch_metadata(**f);
  (void)config_from_gguf(**f);
  (void)vocab_from_gguf(**f);
  convert_tensors(**f);
  read_weights(path);
  return 0;
}
