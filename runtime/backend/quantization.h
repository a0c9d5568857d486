// How a model's decoder linear weights are stored on the device (the `quantization` key): as
// loaded (the compute dtype), or FP8 e4m3 with an fp32 scale per output feature, quantized at
// load (an FP8 checkpoint's codes kept). Embeddings, norms and lm_head stay in the compute dtype
// either way, and so does every linear weight `quantization_keep` names (QuantizationKeep). The
// key's default, auto, picks per model and device (ModelInstance::load): FP8 for an FP8
// checkpoint where every device computes in FP8, else none.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

enum class Quantization { kNone, kFp8 };

// "none" or "fp8"; "auto" (or empty) as no value: the choice left to the load. InvalidArgument
// naming the choices otherwise.
absl::StatusOr<std::optional<Quantization>> parse_quantization(std::string_view text);
std::string_view quantization_name(Quantization q);

// The KV cache's element type (the `kv_cache_dtype` key): the compute dtype ("auto"), or FP8 e4m3
// codes with one scale per layer for K and one for V ("fp8": half the bytes, twice the tokens).
enum class KvCacheDtype { kAuto, kFp8 };

// "auto" or "fp8"; InvalidArgument naming the choices otherwise.
absl::StatusOr<KvCacheDtype> parse_kv_cache_dtype(std::string_view text);
std::string_view kv_cache_dtype_name(KvCacheDtype d);

// A decoder layer's linear weights, as tessera stores them (q/k/v and gate/up fused).
enum class LinearProjection { kQkv, kO, kGateUp, kDown };
inline constexpr int kLinearProjections = 4;
// "qkv", "o", "gate_up", "down".
std::string_view linear_projection_name(LinearProjection p);

// The linear weights `quantization: fp8` leaves in the compute dtype: a comma-separated list of
//   qkv | o | gate_up | down        that projection in every layer
//   layers.N                        every projection of layer N (0-based)
//   layers.N.<projection>           one projection of layer N
// e.g. "down,layers.0,layers.31" (empty: every linear weight in FP8). Keeping weights costs their
// FP8 speed and memory and buys accuracy where they are sensitive.
class QuantizationKeep {
 public:
  QuantizationKeep() = default;
  // InvalidArgument naming the entry that is not one of the forms above.
  static absl::StatusOr<QuantizationKeep> parse(std::string_view list);

  // Whether `projection` of `layer` stays in the compute dtype.
  bool keeps(int64_t layer, LinearProjection projection) const;
  // Layers 0 .. num_layers-1 in which each projection stays in the compute dtype.
  std::array<int64_t, kLinearProjections> kept_layers(int64_t num_layers) const;
  // InvalidArgument naming an entry whose layer is not below `num_layers`.
  absl::Status check_layers(int64_t num_layers) const;
  bool empty() const { return rules_.empty(); }
  // The list as parse() read it, normalized ("" when empty).
  std::string text() const;

 private:
  struct Rule {
    int64_t layer = -1;    // -1: every layer
    uint32_t projections;  // bit per LinearProjection
    std::string entry;
  };
  std::vector<Rule> rules_;
};

}  // namespace tessera
