#include "runtime/model/decoder_layer.h"

#include "base/status_macros.h"

namespace tessera {

absl::StatusOr<DecoderLayer> load_decoder_layer(WeightLoader& loader, Backend& b,
                                                const ModelConfig& c, int64_t i) {
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * d;
  auto name = [i](std::string_view suffix) { return layer_weight_name(i, suffix); };
  const bool fused = c.architecture == "phi3";  // qkv_proj and gate_up_proj stored fused
  DecoderLayer l;
  TESSERA_ASSIGN_OR_RETURN(l.input_layernorm, loader.load(b, {name("input_layernorm.weight")}, {h}));
  if (fused) {
    TESSERA_ASSIGN_OR_RETURN(l.qkv, loader.load(b, {name("self_attn.qkv_proj.weight")}, {qkv_rows, h}));
  } else {
    TESSERA_ASSIGN_OR_RETURN(l.qkv, loader.load(b, {name("self_attn.q_proj.weight"),
                                                    name("self_attn.k_proj.weight"),
                                                    name("self_attn.v_proj.weight")},
                                                {qkv_rows, h}));
  }
  if (c.qkv_bias) {
    TESSERA_ASSIGN_OR_RETURN(l.qkv_bias, loader.load(b, {name("self_attn.q_proj.bias"),
                                                         name("self_attn.k_proj.bias"),
                                                         name("self_attn.v_proj.bias")},
                                                     {qkv_rows}));
  }
  if (c.qk_norm) {
    TESSERA_ASSIGN_OR_RETURN(l.q_norm, loader.load(b, {name("self_attn.q_norm.weight")}, {d}));
    TESSERA_ASSIGN_OR_RETURN(l.k_norm, loader.load(b, {name("self_attn.k_norm.weight")}, {d}));
  }
  TESSERA_ASSIGN_OR_RETURN(l.o, loader.load(b, {name("self_attn.o_proj.weight")}, {h, c.num_heads * d}));
  TESSERA_ASSIGN_OR_RETURN(l.post_attention_layernorm,
                           loader.load(b, {name("post_attention_layernorm.weight")}, {h}));
  if (c.sandwich_norms) {
    TESSERA_ASSIGN_OR_RETURN(l.pre_feedforward_layernorm,
                             loader.load(b, {name("pre_feedforward_layernorm.weight")}, {h}));
    TESSERA_ASSIGN_OR_RETURN(l.post_feedforward_layernorm,
                             loader.load(b, {name("post_feedforward_layernorm.weight")}, {h}));
  }
  if (fused) {
    TESSERA_ASSIGN_OR_RETURN(l.gate_up, loader.load(b, {name("mlp.gate_up_proj.weight")}, {2 * inter, h}));
  } else {
    TESSERA_ASSIGN_OR_RETURN(l.gate_up, loader.load(b, {name("mlp.gate_proj.weight"),
                                                        name("mlp.up_proj.weight")},
                                                    {2 * inter, h}));
  }
  TESSERA_ASSIGN_OR_RETURN(l.down, loader.load(b, {name("mlp.down_proj.weight")}, {h, inter}));
  return l;
}

int64_t decoder_layer_elements(const ModelConfig& c) {
  const int64_t h = c.hidden_size, d = c.head_dim;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * d;
  const int64_t norms = (c.sandwich_norms ? 4 : 2) * h + (c.qk_norm ? 2 * d : 0);
  return norms + qkv_rows * h + (c.qkv_bias ? qkv_rows : 0) + h * c.num_heads * d +
         3 * c.intermediate_size * h;
}

}  // namespace tessera
