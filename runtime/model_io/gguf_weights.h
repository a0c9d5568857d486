// WeightSource over one GGUF file: tensors are addressed by their HF names and converted to fp32
// in HF layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model_io/gguf_file.h"
#include "runtime/model_io/weight_source.h"

namespace tessera {

// llama.cpp's converter stores each llama Q/K projection with its rows permuted for interleaved
// (GPT-J style) rotary: w.reshape(n_head, 2, head_dim / 2, in).swapaxes(1, 2).reshape(out, in).
// Stored row h*head_dim + 2*j + t holds HF row h*head_dim + t*head_dim/2 + j. This returns the HF
// row that `stored_row` holds (head_dim must be even).
int64_t qk_unpermuted_row(int64_t stored_row, int64_t head_dim);

class GgufWeights final : public WeightSource {
 public:
  // Opens and validates the file and its config (see config_from_gguf). GGUF names map to HF
  // names (weight_names.h); names without a mapping are kept as they are.
  static absl::StatusOr<std::unique_ptr<GgufWeights>> open(const std::string& path);

  // The underlying file, e.g. for vocab_from_gguf().
  const GgufFile& gguf() const { return *gguf_; }

  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return gguf_->path(); }
  std::vector<TensorInfo> tensors() const override;
  bool has(std::string_view hf_name) const override;
  absl::StatusOr<RawTensor> raw(std::string_view hf_name) const override;
  absl::Status read_f32(std::string_view hf_name, std::span<const int64_t> expected_shape,
                        std::span<float> out) const override;

 private:
  struct Entry {
    std::string hf_name;
    const GgufTensorInfo* info = nullptr;
    int64_t qk_heads = 0;  // > 0: rows are permuted in groups of this many heads
  };

  GgufWeights() = default;
  const Entry* find(std::string_view hf_name) const;

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  std::vector<Entry> entries_;                        // file order
  std::map<std::string, size_t, std::less<>> index_;  // HF name -> entries_ index
};

}  // namespace tessera
