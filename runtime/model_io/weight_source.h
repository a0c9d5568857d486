// A model's weights as stored on disk, addressed by their Hugging Face names.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "runtime/model_io/model_config.h"
#include "runtime/model_io/weight_scales.h"

namespace tessera {

struct TensorInfo {
  std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // HF (PyTorch) order, outermost first: [out_features, in_features]
};

// The stored bytes of one tensor, as mapped from the file (valid while the source lives).
struct RawTensor {
  TensorInfo info;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  bool qk_permuted = false;  // GGUF llama q/k rows are interleaved for rotary; read_f32 undoes it
  int64_t qk_head_dim = 0;   // rows per head of that interleave (gguf_weights.h); 0 if none
  // An FP8 checkpoint's weight: its value is each stored element times its scale
  // (weight_scales.h), which read_f32 applies. Only FP8 tensors are scaled, and never with
  // qk_permuted (GGUF has no FP8).
  WeightScales scales;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  virtual const ModelConfig& config() const = 0;
  // Where the weights come from (file or directory), for messages.
  virtual const std::string& path() const = 0;
  virtual std::vector<TensorInfo> tensors() const = 0;
  virtual bool has(std::string_view hf_name) const = 0;

  // The mapped bytes of a tensor; an error names the file and the tensor when it is missing.
  // read_f32 gives exactly dequantize_scaled_f32_checked of these bytes with their scales (for an
  // unscaled tensor, dequantize_f32), with stored row s moved to HF row
  // qk_unpermuted_row(s, qk_head_dim) when qk_permuted (GpuBackend converts unscaled types on the
  // device and relies on that; scaled FP8 tensors take its host path, through read_f32).
  virtual absl::StatusOr<RawTensor> raw(std::string_view hf_name) const = 0;

  // Reads a tensor as fp32 in HF layout (dequantized, q/k rows un-permuted), after checking that
  // its shape is `expected_shape`; `out` must hold exactly that many elements. Errors name the
  // file, the tensor, and what was wrong; an element that is NaN or infinite once converted is
  // one (non_finite_weight_error), found during the conversion itself.
  virtual absl::Status read_f32(std::string_view hf_name, std::span<const int64_t> expected_shape,
                                std::span<float> out) const = 0;
};

// The load error for a tensor whose element `element` is not finite once converted to
// `converted_to` (the dtype it is held in: fp32 for read_f32, the GPU's compute dtype there).
// `element` counts row-major over the stored rows, as read_f32's conversion and the GPU's walk
// them (for GGUF's permuted q/k rows that is not the HF row order; the message gives both rows).
// InvalidArgument: "<where>: element 1234 (row 2, column 10) is NaN; ..." -- where names the file
// and the tensor -- with the stored value: NaN, inf, or a finite value `converted_to` cannot hold.
absl::Status non_finite_weight_error(std::string_view where, const RawTensor& tensor,
                                     int64_t element, DType converted_to);

// Opens a GGUF file, or an HF directory of config.json + *.safetensors (sharded or not).
absl::StatusOr<std::unique_ptr<WeightSource>> open_weights(const std::string& path);

}  // namespace tessera
