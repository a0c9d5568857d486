// The hyper-parameters of a Llama-family model, from HF config.json or GGUF metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tessera {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;   // llama3 only
  float high_freq_factor = 4.0f;  // llama3 only
  int64_t original_max_position = 8192;  // llama3 only
};

// How RoPE pairs a head's dimensions: (i, i + head_dim/2) as HF Llama rotates them
// ("rotate half", GPT-NeoX), or (2i, 2i + 1) as llama.cpp's "norm" rope and GPT-J do. Dimension
// pair i turns by position * inv_freq[i] either way.
enum class RopeStyle { kRotateHalf, kInterleaved };

struct ModelConfig {
  std::string architecture;  // "llama" (HF LlamaForCausalLM / GGUF general.architecture)
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

  // Checks every field for sanity (positive, divisible, bounded) and names the first bad one.
  absl::Status validate() const;
};

// Architectures whose forward pass tessera implements, for error messages.
const std::vector<std::string>& supported_architectures();

}  // namespace tessera
