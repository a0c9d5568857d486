// GGUF <-> Hugging Face tensor names, per GGUF architecture (general.architecture): the same
// GGUF name means another HF tensor in some families (Gemma's ffn_norm is its
// pre_feedforward_layernorm, Phi-3's ffn_up its fused gate_up_proj).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight" (likewise ".bias");
// "rope_freqs.weight" maps to itself. nullopt for a name with no mapping in `arch`.
std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name, std::string_view arch = "llama");

// The inverse of gguf_to_hf_name.
std::optional<std::string> hf_to_gguf_name(std::string_view hf_name, std::string_view arch = "llama");

// Whether a GGUF tensor is a Q or K projection that the converter stored with rows permuted for
// interleaved rotary (see gguf_weights.h): the "llama" architecture's only (Llama and Mistral;
// the other families rotate NeoX-style and are stored as in HF). `is_k` tells which it is.
bool is_gguf_qk_projection(std::string_view gguf_name, bool* is_k, std::string_view arch = "llama");

}  // namespace tessera
