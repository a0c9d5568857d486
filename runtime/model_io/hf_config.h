// ModelConfig from a Hugging Face config.json.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/model_io/model_config.h"

namespace tessera {

// Parses config.json text. `path` is only used in messages. Requires a llama model
// (architectures containing LlamaForCausalLM, or model_type "llama") and hidden_size,
// intermediate_size, num_hidden_layers, num_attention_heads, vocab_size; the other keys take
// transformers' LlamaConfig defaults when absent or null. rope_scaling may be null or
// {rope_type|type: default | linear | llama3, ...}. quantization_config (or compression_config)
// may describe FP8 weights (ModelConfig::quantization): quant_method "fp8" (per-tensor or
// per-channel weight_scale; weight_block_size with weight_scale_inv) or "compressed-tensors"
// (format float-quantized / naive-quantized, config groups of 8-bit float weights per tensor,
// channel or block, activations null, dynamic or static); any other method or a setting that
// changes the math (int or 4-bit weights, sparsity, transforms, output quantization) is an error
// naming the key and its value. The result is validated. Errors name the file and the key (with
// its actual JSON type when ill-typed).
absl::StatusOr<ModelConfig> config_from_hf_json(std::string_view json_text,
                                                const std::string& path);

// Reads and parses the file at `path` (normally <model dir>/config.json).
absl::StatusOr<ModelConfig> config_from_hf_file(const std::string& path);

}  // namespace tessera
