// The llama family fixture (fp32 safetensors) written as an FP8 checkpoint the way llm-compressor's
// "FP8-dynamic" checkpoints are -- every linear weight of the layers to e4m3fn per output channel
// with scale = amax / 448, a compressed-tensors quantization_config, embeddings, norms and lm_head
// kept fp32 -- beside an fp32 checkpoint holding exactly its dequantized values (code * scale):
// for the CPU's FP8 checkpoint tests and the GPU's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/fp8.h"
#include "runtime/model_io/safetensors_file.h"
#include "tests/unit/model/safetensors_builder.h"
#include "tests/unit/runtime/family_fixtures.h"

namespace tessera::testing {

// A builder's file at `path`.
inline void write_file(const SafetensorsBuilder& b, const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << b.build();
  ASSERT_TRUE(out.good()) << path;
}

inline bool is_fp8_linear(std::string_view name) {
  return name.starts_with("model.layers.") && name.ends_with("_proj.weight");
}

// Writes <fp8_dir> (e4m3fn weights with a scale per output channel, or with `per_tensor` one per
// tensor, amax / 448; a compressed-tensors config) and <dequant_dir> (fp32: exactly code * scale)
// from the llama fixture's HF directory (under `fixture`).
inline void write_fp8_checkpoints(const std::filesystem::path& fp8_dir,
                                  const std::filesystem::path& dequant_dir,
                                  bool per_tensor = false,
                                  const std::filesystem::path& fixture = kFamilyFixtures / "llama") {
  const std::filesystem::path src = fixture / "hf";
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::open((src / "model.safetensors").string());
  ASSERT_TRUE(file.ok()) << file.status();
  SafetensorsBuilder fp8, dequant;
  for (const SafetensorsTensor& t : (*file)->tensors()) {
    ASSERT_EQ(t.dtype, DType::kF32) << t.name;
    const std::span<const uint8_t> bytes = (*file)->tensor_bytes(t);
    std::vector<float> w(bytes.size() / 4);
    std::memcpy(w.data(), bytes.data(), bytes.size());
    if (!is_fp8_linear(t.name)) {
      fp8.tensor(t.name, "F32", t.shape, w.data(), bytes.size());
      dequant.tensor(t.name, "F32", t.shape, w.data(), bytes.size());
      continue;
    }
    ASSERT_EQ(t.shape.size(), 2u) << t.name;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<uint8_t> codes(w.size());
    std::vector<float> scales(static_cast<size_t>(rows)), values(w.size());
    float tensor_amax = 0;
    for (const float x : w) tensor_amax = std::max(tensor_amax, std::fabs(x));
    for (int64_t r = 0; r < rows; ++r) {
      float amax = tensor_amax;
      if (!per_tensor) {
        amax = 0;
        for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      }
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      scales[r] = scale;
      for (int64_t c = 0; c < cols; ++c) {
        const size_t k = static_cast<size_t>(r * cols + c);
        codes[k] = float_to_fp8_e4m3fn(w[k] / scale);
        values[k] = fp8_e4m3fn_to_float(codes[k]) * scale;
      }
    }
    fp8.tensor(t.name, "F8_E4M3", t.shape, codes.data(), codes.size());
    const std::string scale_name = t.name + "_scale";  // <prefix>.weight_scale
    if (per_tensor) {
      fp8.tensor(scale_name, "F32", {}, scales.data(), 4);
    } else {
      fp8.tensor(scale_name, "F32", {rows, 1}, scales.data(), scales.size() * 4);
    }
    dequant.tensor(t.name, "F32", t.shape, values.data(), values.size() * 4);
  }
  for (const std::filesystem::path& dir : {fp8_dir, dequant_dir}) {
    std::filesystem::create_directories(dir);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
      std::filesystem::copy_file(src / name, dir / name, std::filesystem::copy_options::overwrite_existing);
    }
  }
  write_file(fp8, fp8_dir / "model.safetensors");
  write_file(dequant, dequant_dir / "model.safetensors");
  std::ifstream in(src / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  std::ofstream(dequant_dir / "config.json") << config.dump(2);
  config["quantization_config"] = nlohmann::json::parse(R"({
    "quant_method": "compressed-tensors", "format": "float-quantized",
    "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": null,
    "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "symmetric": true, "strategy": "channel",
                  "dynamic": false},
      "input_activations": {"num_bits": 8, "type": "float", "symmetric": true,
                            "strategy": "token", "dynamic": true},
      "output_activations": null}}})");
  if (per_tensor) {
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "tensor";
  }
  std::ofstream(fp8_dir / "config.json") << config.dump(2);
}

}  // namespace tessera::testing
