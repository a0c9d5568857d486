#include "runtime/model_io/weight_names.h"

#include <algorithm>
#include <charconv>
#include <span>
#include <cstdint>

#include "base/str_cat.h"

namespace tessera {
namespace {

struct NamePair {
  std::string_view gguf;
  std::string_view hf;
};

// Whole-model tensors, without the ".weight"/".bias" suffix.
constexpr NamePair kGlobal[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
    {"rope_freqs", "rope_freqs"},  // llama3 rope factors: no HF tensor, kept under its own name
};

// Per-layer tensors: "blk.N.<gguf>" <-> "model.layers.N.<hf>". A family's own pairs come first
// and win over the common ones of the same GGUF or HF name.
constexpr NamePair kLayer[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},       {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
};
// Gemma 2/3: the sandwich norms; ffn_norm normalizes the MLP's input.
constexpr NamePair kGemmaLayer[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
// Phi-3: q/k/v and gate/up stay fused.
constexpr NamePair kPhi3Layer[] = {
    {"attn_qkv", "self_attn.qkv_proj"},
    {"ffn_up", "mlp.gate_up_proj"},
};

std::span<const NamePair> family_layer_pairs(std::string_view arch) {
  if (arch == "gemma2" || arch == "gemma3") return kGemmaLayer;
  if (arch == "phi3") return kPhi3Layer;
  return {};
}

// Splits off ".weight" or ".bias"; false when the name has neither.
bool split_suffix(std::string_view name, std::string_view* stem, std::string_view* suffix) {
  for (std::string_view s : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (name.ends_with(s)) {
      *stem = name.substr(0, name.size() - s.size());
      *suffix = s;
      return true;
    }
  }
  return false;
}

// Parses "<prefix><layer>.<rest>" with a canonical decimal layer number (no sign, no leading
// zeros), so that each name has exactly one counterpart.
bool split_layer(std::string_view stem, std::string_view prefix, std::string_view* layer,
                 std::string_view* rest) {
  if (!stem.starts_with(prefix)) return false;
  stem.remove_prefix(prefix.size());
  const size_t dot = stem.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 9) return false;
  std::string_view digits = stem.substr(0, dot);
  if (digits.size() > 1 && digits[0] == '0') return false;
  uint32_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  *layer = digits;
  *rest = stem.substr(dot + 1);
  return true;
}

std::optional<std::string> map_name(std::string_view name, bool to_hf, std::string_view arch) {
  std::string_view stem, suffix;
  if (!split_suffix(name, &stem, &suffix)) return std::nullopt;
  for (const NamePair& p : kGlobal) {
    if (stem == (to_hf ? p.gguf : p.hf)) return str_cat(to_hf ? p.hf : p.gguf, suffix);
  }
  std::string_view layer, rest;
  if (!split_layer(stem, to_hf ? "blk." : "model.layers.", &layer, &rest)) return std::nullopt;
  const std::span<const NamePair> own = family_layer_pairs(arch);
  auto mapped = [&](const NamePair& p) {
    return to_hf ? str_cat("model.layers.", layer, ".", p.hf, suffix)
                 : str_cat("blk.", layer, ".", p.gguf, suffix);
  };
  for (const NamePair& p : own) {
    if (rest == (to_hf ? p.gguf : p.hf)) return mapped(p);
  }
  for (const NamePair& p : kLayer) {
    if (rest != (to_hf ? p.gguf : p.hf)) continue;
    // A common pair whose other side the family gives another meaning does not apply.
    const bool overridden = std::any_of(own.begin(), own.end(), [&](const NamePair& o) {
      return (to_hf ? o.hf : o.gguf) == (to_hf ? p.hf : p.gguf);
    });
    return overridden ? std::nullopt : std::optional<std::string>(mapped(p));
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name, std::string_view arch) {
  return map_name(gguf_name, /*to_hf=*/true, arch);
}

std::optional<std::string> hf_to_gguf_name(std::string_view hf_name, std::string_view arch) {
  return map_name(hf_name, /*to_hf=*/false, arch);
}

bool is_gguf_qk_projection(std::string_view gguf_name, bool* is_k, std::string_view arch) {
  if (arch != "llama") return false;
  std::string_view stem, suffix, layer, rest;
  if (!split_suffix(gguf_name, &stem, &suffix)) return false;
  if (!split_layer(stem, "blk.", &layer, &rest)) return false;
  if (rest != "attn_q" && rest != "attn_k") return false;
  *is_k = rest == "attn_k";
  return true;
}

}  // namespace tessera
