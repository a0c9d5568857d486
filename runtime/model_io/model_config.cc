#include "runtime/model_io/model_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

// Upper bounds far above any released Llama-family model; they exist so that a corrupt config
// fails here instead of as a multi-terabyte allocation later.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = int64_t{1} << 17;
constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 1024;
constexpr int64_t kMaxPositions = int64_t{1} << 27;

absl::Status check_range(std::string_view field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        str_cat(field, ": ", value, " is out of range [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status check_positive_finite(std::string_view field, float value) {
  if (!std::isfinite(value) || value <= 0.0f) {
    return absl::InvalidArgumentError(
        str_cat(field, ": ", value, " must be a positive finite number"));
  }
  return absl::OkStatus();
}

absl::Status check_rope_scaling(const RopeScaling& s) {
  switch (s.type) {
    case RopeScaling::Type::kNone:
      return absl::OkStatus();
    case RopeScaling::Type::kLinear:
      return check_positive_finite("rope_scaling.factor", s.factor);
    case RopeScaling::Type::kYarn: {
      for (const auto& [name, value] : {std::pair<std::string_view, float>{"factor", s.factor},
                                        {"beta_fast", s.beta_fast},
                                        {"beta_slow", s.beta_slow}}) {
        if (absl::Status st = check_positive_finite(str_cat("rope_scaling.", name), value);
            !st.ok()) {
          return st;
        }
      }
      if (s.attention_factor < 0.0f || !std::isfinite(s.attention_factor)) {
        return absl::InvalidArgumentError(str_cat("rope_scaling.attention_factor: ",
                                                  s.attention_factor, " must be finite and >= 0"));
      }
      return check_range("rope_scaling.original_max_position_embeddings", s.original_max_position,
                         1, kMaxPositions);
    }
    case RopeScaling::Type::kLlama3: {
      if (absl::Status st = check_positive_finite("rope_scaling.factor", s.factor); !st.ok()) {
        return st;
      }
      if (absl::Status st =
              check_positive_finite("rope_scaling.low_freq_factor", s.low_freq_factor);
          !st.ok()) {
        return st;
      }
      if (absl::Status st =
              check_positive_finite("rope_scaling.high_freq_factor", s.high_freq_factor);
          !st.ok()) {
        return st;
      }
      // The smooth interpolation divides by (high - low).
      if (!(s.high_freq_factor > s.low_freq_factor)) {
        return absl::InvalidArgumentError(
            str_cat("rope_scaling.high_freq_factor: ", s.high_freq_factor,
                    " must be greater than low_freq_factor ", s.low_freq_factor));
      }
      return check_range("rope_scaling.original_max_position_embeddings", s.original_max_position,
                         1, kMaxPositions);
    }
  }
  return absl::InvalidArgumentError("rope_scaling.type: unknown value");
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kArchitectures = {"llama",  "mistral", "qwen2", "qwen3",
                                                          "gemma2", "gemma3",  "phi3"};
  return kArchitectures;
}

absl::Status ModelConfig::validate() const {
  const auto& archs = supported_architectures();
  if (std::find(archs.begin(), archs.end(), architecture) == archs.end()) {
    return absl::InvalidArgumentError(
        str_cat("architecture: '", architecture,
                "' is not supported (supported: ", absl::StrJoin(archs, ", "), ")"));
  }
  struct Field {
    std::string_view name;
    int64_t value;
    int64_t hi;
  };
  const Field fields[] = {
      {"vocab_size", vocab_size, kMaxVocab},
      {"hidden_size", hidden_size, kMaxHidden},
      {"intermediate_size", intermediate_size, kMaxIntermediate},
      {"num_layers", num_layers, kMaxLayers},
      {"num_heads", num_heads, kMaxHeads},
      {"num_kv_heads", num_kv_heads, kMaxHeads},
      {"head_dim", head_dim, kMaxHeadDim},
      {"max_position_embeddings", max_position_embeddings, kMaxPositions},
  };
  for (const Field& f : fields) {
    if (absl::Status st = check_range(f.name, f.value, 1, f.hi); !st.ok()) return st;
  }
  if (num_heads % num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        str_cat("num_kv_heads: ", num_kv_heads, " does not divide num_heads ", num_heads));
  }
  // Rotary embedding rotates pairs of dimensions.
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(str_cat("head_dim: ", head_dim, " must be even"));
  }
  if (absl::Status st = check_positive_finite("rms_norm_eps", rms_norm_eps); !st.ok()) return st;
  if (rms_norm_eps >= 1.0f) {
    return absl::InvalidArgumentError(str_cat("rms_norm_eps: ", rms_norm_eps, " must be below 1"));
  }
  if (absl::Status st = check_positive_finite("rope_theta", rope_theta); !st.ok()) return st;
  if (absl::Status st = check_rope_scaling(rope_scaling); !st.ok()) return st;
  return validate_features();
}

absl::Status ModelConfig::validate_features() const {
  for (const auto& [name, value] :
       {std::pair<std::string_view, float>{"embedding_scale", embedding_scale}}) {
    if (absl::Status st = check_positive_finite(name, value); !st.ok()) return st;
  }
  for (const auto& [name, value] :
       {std::pair<std::string_view, float>{"norm_weight_offset", norm_weight_offset},
        {"attn_logit_softcapping", attn_logit_softcap},
        {"final_logit_softcapping", final_logit_softcap},
        {"query_pre_attn_scalar", query_pre_attn_scalar},
        {"rope_local_base_freq", rope_local_theta}}) {
    if (!std::isfinite(value) || value < 0.0f) {
      return absl::InvalidArgumentError(str_cat(name, ": ", value, " must be finite and >= 0"));
    }
  }
  if (absl::Status st = check_range("sliding_window", sliding_window, 0, kMaxPositions); !st.ok()) {
    return st;
  }
  if (sliding_window > 0 && static_cast<int64_t>(sliding_layers.size()) != num_layers) {
    return absl::InvalidArgumentError(str_cat("layer_types: ", sliding_layers.size(),
                                              " entries for ", num_layers, " layers"));
  }
  return absl::OkStatus();
}

std::string_view activation_name(Activation act) {
  switch (act) {
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluTanh:
      return "gelu_pytorch_tanh";
  }
  return "unknown";
}

std::string_view quantization_method_name(WeightQuantization::Method m) {
  switch (m) {
    case WeightQuantization::Method::kNone:
      return "none";
    case WeightQuantization::Method::kFp8:
      return "fp8";
    case WeightQuantization::Method::kCompressedTensors:
      return "compressed-tensors";
  }
  return "unknown";
}

}  // namespace tessera
