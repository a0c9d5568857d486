// An FP8 KV cache's scales (kv_cache_dtype: fp8): one per layer for K and one for V, value = code
// x scale. Read from the checkpoint where it has them; otherwise measured at load by a
// calibration prefill whose largest |k| and |v| per layer set them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/runner/forward_model.h"

namespace tessera {

struct LayerKvScales {
  float k = 1.0f;
  float v = 1.0f;
};

// The checkpoint's per-layer KV scales, or nullopt when it has none. Per layer i, in order of
// preference: model.layers.i.self_attn.k_scale and .v_scale (vLLM's and llm-compressor's FP8
// checkpoints), self_attn.k_proj.output_scale and .v_proj.output_scale (compressed-tensors as
// stored), or one self_attn.kv_scale for both (older vLLM checkpoints). An error names the tensor
// when a scale is not one finite positive value, or when some layers have scales and one does
// not.
absl::StatusOr<std::optional<std::vector<LayerKvScales>>> read_checkpoint_kv_scales(
    const WeightSource& weights, int32_t num_layers);

// Headroom over the calibration text's largest |k| and |v|: a later input may exceed them by this
// factor before its codes saturate.
inline constexpr float kKvCalibrationHeadroom = 2.0f;

// Runs a prefill of `tokens` (chunked to the model's step limits) through `model` over `cache`
// with calibration on, twice -- the second pass under the first's scales -- and sets and returns
// each layer's scales: largest |k| (|v|) x headroom / the e4m3fn largest finite value (448). The
// blocks it used go back to the cache's free list; what they hold is never read.
absl::StatusOr<std::vector<LayerKvScales>> calibrate_kv_scales(ForwardModel& model, KvCache& cache,
                                                               std::span<const int32_t> tokens);

// English prose for the calibration prefill (a few hundred tokens).
extern const char kKvCalibrationText[];

}  // namespace tessera
