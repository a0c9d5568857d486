// GGUF <-> Hugging Face tensor names for the llama architecture.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (likewise ".bias");
// "rope_freqs.weight" maps to itself. nullopt for a name with no llama mapping.
std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name);

// The inverse of gguf_to_hf_name.
std::optional<std::string> hf_to_gguf_name(std::string_view hf_name);

// Whether a GGUF tensor is a llama Q or K projection, which the converter stored with rows
// permuted for interleaved rotary (see gguf_weights.h). `is_k` tells which of the two it is.
bool is_gguf_qk_projection(std::string_view gguf_name, bool* is_k);

}  // namespace tessera
