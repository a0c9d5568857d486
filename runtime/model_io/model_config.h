// The architecture description of a model: its hyper-parameters and the features the shared
// forward reads (norm kind, sandwich norms, activation, biases, q/k norms, embedding scale,
// soft-caps, sliding windows, rope per layer), from HF config.json or GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tessera {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3, kYarn };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // llama3 only
  float high_freq_factor = 4.0f;  // llama3 only
  int64_t original_max_position = 8192;  // llama3 and yarn
  float beta_fast = 32.0f;        // yarn only: the rotations per context where extrapolation ends
  float beta_slow = 1.0f;         // yarn only: ... and where interpolation begins
  // yarn only: the factor on cos and sin (so on q.k twice); 0 = transformers' default,
  // 0.1 ln(factor) + 1.
  float attention_factor = 0.0f;
};

// The activation of the gated MLP: act(gate) * up.
enum class Activation {
  kSilu,      // x * sigmoid(x) (Llama, Mistral, Qwen, Phi-3)
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gemma)
};
std::string_view activation_name(Activation act);

// How RoPE pairs a head's dimensions: (i, i + head_dim/2) as HF Llama rotates them
// ("rotate half", GPT-NeoX), or (2i, 2i + 1) as llama.cpp's "norm" rope and GPT-J do. Dimension
// pair i turns by position * inv_freq[i] either way.
enum class RopeStyle { kRotateHalf, kInterleaved };

// How a checkpoint's weights are quantized (config.json quantization_config). Only FP8 weights
// are loaded: an FP8 `<prefix>.weight` has its scales in `<prefix>.<scale_suffix>`, and is
// converted at load to the compute dtype (the checkpoint's activation quantization, kept here
// for the FP8 compute path, is not applied). Tensors stored in higher precision (embeddings,
// norms, lm_head and whatever else the checkpoint left unquantized) are read as they are.
struct WeightQuantization {
  enum class Method {
    kNone,               // no quantization_config
    kFp8,                // quant_method "fp8" (AutoFP8, transformers' FineGrainedFP8)
    kCompressedTensors,  // quant_method "compressed-tensors" with 8-bit float weights
  };
  enum class Activations {
    kNone,     // weight-only (W8A16)
    kDynamic,  // quantized on the fly (per token, per tensor or per group)
    kStatic,   // one stored scale per linear: `<prefix>.input_scale`, required
  };
  Method method = Method::kNone;
  std::string scale_suffix;     // "weight_scale" or "weight_scale_inv" (block-wise "fp8")
  bool per_tensor = false;      // scale [] or [1] allowed
  bool per_channel = false;     // scale [out, 1] or [out] allowed
  int64_t block_rows = 0;       // > 0: scale grid [ceil(out / block_rows), ceil(in / block_cols)]
  int64_t block_cols = 0;
  Activations activations = Activations::kNone;
  std::string activation_strategy;   // "token", "tensor", "group" (compressed-tensors), or empty
  std::vector<std::string> ignore;   // modules the config leaves unquantized (names, "re:" patterns)
  // The checkpoint carries KV-cache scales (kv_cache_scheme): read when kv_cache_dtype is fp8
  // (runtime/kv_cache_scales.h); an fp8 cache without them is calibrated at load.
  bool kv_cache_scales = false;

  bool quantized() const { return method != Method::kNone; }
};
std::string_view quantization_method_name(WeightQuantization::Method m);

struct ModelConfig {
  // The family: "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3" or "phi3" (HF
  // model_type / GGUF general.architecture).
  std::string architecture;
  std::string name;          // human-readable, may be empty
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_heads unless given
  int64_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  RopeStyle rope_style = RopeStyle::kRotateHalf;
  bool tie_word_embeddings = false;

  // --- what the shared forward does (the architecture description) ---------------------------
  // RMSNorm scales by (norm_weight_offset + w): Gemma's checkpoints store w - 1 (offset 1).
  float norm_weight_offset = 0.0f;
  // Gemma 2/3: the attention and MLP outputs are normalized before they join the residual
  // stream (post_attention_layernorm, post_feedforward_layernorm), and the MLP's input norm is
  // pre_feedforward_layernorm.
  bool sandwich_norms = false;
  Activation activation = Activation::kSilu;
  bool qkv_bias = false;            // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;             // each q and k head RMS-normalized before RoPE (Qwen3, Gemma 3)
  float embedding_scale = 1.0f;     // embeddings multiplied by it (Gemma: sqrt(hidden_size))
  float attn_logit_softcap = 0.0f;  // > 0: scores = cap * tanh(scores / cap) (Gemma 2)
  float final_logit_softcap = 0.0f; // > 0: the same on the logits (Gemma 2)
  // > 0: attention scale is query_pre_attn_scalar^-1/2 instead of head_dim^-1/2 (Gemma).
  float query_pre_attn_scalar = 0.0f;
  // > 0: layers marked in sliding_layers see only the last sliding_window positions.
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // [num_layers]; empty with sliding_window 0
  // > 0: RoPE theta of the sliding layers, which then take no rope scaling (Gemma 3's local
  // layers); 0: every layer uses rope_theta and rope_scaling.
  float rope_local_theta = 0.0f;

  // FP8 checkpoints: where the weights' scales are (config.json quantization_config).
  WeightQuantization quantization;

  // Whether layer `i` attends through the sliding window.
  bool is_sliding(int64_t layer) const {
    return sliding_window > 0 && static_cast<size_t>(layer) < sliding_layers.size() &&
           sliding_layers[static_cast<size_t>(layer)];
  }

  // Checks every field for sanity (positive, divisible, bounded) and names the first bad one.
  absl::Status validate() const;

 private:
  absl::Status validate_features() const;
};

// Architectures (families) whose forward pass tessera implements, for error messages.
const std::vector<std::string>& supported_architectures();

}  // namespace tessera
