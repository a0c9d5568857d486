// WeightSource over a Hugging Face model directory: config.json plus safetensors weights.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model_io/safetensors_file.h"
#include "runtime/model_io/weight_source.h"

namespace tessera {

class SafetensorsWeights final : public WeightSource {
 public:
  // Reads <dir>/config.json (config_from_hf_file) and the weights:
  //  - model.safetensors.index.json present: its weight_map {tensor: shard file}; every shard must
  //    exist in `dir` and hold each tensor mapped to it;
  //  - else model.safetensors alone when present;
  //  - else every *.safetensors in `dir`, a tensor name appearing in two of them being an error.
  // FP8 tensors (F8_E4M3, F8_E5M2) need config.json's quantization_config and their scale
  // tensors, found and checked here (the error names the weight, the scale tensor, and what is
  // wrong: missing, dtype, shape, a value not finite and positive); raw() carries them and
  // read_f32 applies them.
  static absl::StatusOr<std::unique_ptr<SafetensorsWeights>> open(const std::string& dir);

  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return dir_; }
  std::vector<TensorInfo> tensors() const override;
  bool has(std::string_view hf_name) const override;
  absl::StatusOr<RawTensor> raw(std::string_view hf_name) const override;
  absl::Status read_f32(std::string_view hf_name, std::span<const int64_t> expected_shape,
                        std::span<float> out) const override;

 private:
  struct Entry {
    const SafetensorsFile* file = nullptr;
    const SafetensorsTensor* tensor = nullptr;
    WeightScales scales;  // an FP8 weight's, resolved by open()
  };

  SafetensorsWeights() = default;
  absl::Status load_index(const std::string& index_path);
  absl::Status load_files(const std::vector<std::string>& names);
  absl::StatusOr<const SafetensorsFile*> open_shard(const std::string& name);
  // Finds and checks the scales of every FP8 tensor (config_.quantization says where), and
  // refuses an FP8 tensor without them or a higher-precision weight that has them.
  absl::Status resolve_scales();
  absl::StatusOr<WeightScales> scales_of(const std::string& name, const Entry& e) const;
  // A scale tensor, after checking that it is there and of a scale's dtype (F32, F16 or BF16);
  // `what` names the weight for messages.
  absl::StatusOr<const SafetensorsTensor*> scale_tensor(const std::string& what,
                                                        const std::string& scale_name) const;
  // Its values in fp32, each checked finite and positive (the caller has checked its shape, so
  // that a misshapen one is refused before anything is converted).
  absl::StatusOr<std::vector<float>> scale_values(const std::string& what,
                                                  const std::string& scale_name) const;

  std::string dir_;
  ModelConfig config_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;  // file name -> file
  std::map<std::string, Entry, std::less<>> entries_;               // tensor name -> location
};

}  // namespace tessera
