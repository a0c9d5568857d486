#include "runtime/model_io/weight_names.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(WeightNamesTest, EveryLlamaTensorMapsBothWays) {
  const std::pair<const char*, const char*> pairs[] = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"rope_freqs.weight", "rope_freqs.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"blk.1.attn_k.weight", "model.layers.1.self_attn.k_proj.weight"},
      {"blk.12.attn_v.weight", "model.layers.12.self_attn.v_proj.weight"},
      {"blk.29.attn_output.weight", "model.layers.29.self_attn.o_proj.weight"},
      {"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
      {"blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight"},
      {"blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight"},
      {"blk.125.ffn_down.weight", "model.layers.125.mlp.down_proj.weight"},
      {"blk.7.attn_q.bias", "model.layers.7.self_attn.q_proj.bias"},
  };
  for (const auto& [gguf, hf] : pairs) {
    EXPECT_EQ(gguf_to_hf_name(gguf), std::optional<std::string>(hf)) << gguf;
    EXPECT_EQ(hf_to_gguf_name(hf), std::optional<std::string>(gguf)) << hf;
  }
}

TEST(WeightNamesTest, UnknownNamesHaveNoMapping) {
  for (const char* name :
       {"blk.0.attn_qkv.weight", "blk.x.attn_q.weight", "blk.01.attn_q.weight",
        "blk..attn_q.weight", "blk.-1.attn_q.weight", "token_embd", "token_embd.scale",
        "blk.0.attn_q", "model.layers.0.attn_q.weight", "", "blk.99999999999.attn_q.weight"}) {
    EXPECT_EQ(gguf_to_hf_name(name), std::nullopt) << name;
  }
  for (const char* name :
       {"model.layers.0.self_attn.qkv.weight", "model.layers.a.mlp.up_proj.weight", "lm_head",
        "blk.0.attn_q.weight", "model.embed_tokens.scales"}) {
    EXPECT_EQ(hf_to_gguf_name(name), std::nullopt) << name;
  }
}

TEST(WeightNamesTest, QkProjections) {
  bool is_k = true;
  EXPECT_TRUE(is_gguf_qk_projection("blk.4.attn_q.weight", &is_k));
  EXPECT_FALSE(is_k);
  EXPECT_TRUE(is_gguf_qk_projection("blk.4.attn_k.weight", &is_k));
  EXPECT_TRUE(is_k);
  EXPECT_TRUE(is_gguf_qk_projection("blk.4.attn_k.bias", &is_k));
  EXPECT_FALSE(is_gguf_qk_projection("blk.4.attn_v.weight", &is_k));
  EXPECT_FALSE(is_gguf_qk_projection("blk.4.attn_output.weight", &is_k));
  EXPECT_FALSE(is_gguf_qk_projection("model.layers.4.self_attn.q_proj.weight", &is_k));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The same GGUF name is another HF tensor in Gemma (ffn_norm: the MLP's input norm, with the
// sandwich norms beside it) and Phi-3 (ffn_up: the fused gate_up); only llama's Q/K are
// permuted.
TEST(WeightNames, FamiliesMapTheirOwnTensors) {
  EXPECT_EQ(gguf_to_hf_name("blk.2.ffn_norm.weight", "llama"),
            "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.2.ffn_norm.weight", "gemma2"),
            "model.layers.2.pre_feedforward_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.2.post_attention_norm.weight", "gemma3"),
            "model.layers.2.post_attention_layernorm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.2.post_ffw_norm.weight", "gemma2"),
            "model.layers.2.post_feedforward_layernorm.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.2.post_attention_layernorm.weight", "gemma2"),
            "blk.2.post_attention_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.0.attn_q_norm.weight", "qwen3"), "model.layers.0.self_attn.q_norm.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.1.attn_qkv.weight", "phi3"), "model.layers.1.self_attn.qkv_proj.weight");
  EXPECT_EQ(gguf_to_hf_name("blk.1.ffn_up.weight", "phi3"), "model.layers.1.mlp.gate_up_proj.weight");
  EXPECT_EQ(hf_to_gguf_name("model.layers.1.mlp.up_proj.weight", "phi3"), std::nullopt);
  EXPECT_EQ(gguf_to_hf_name("blk.1.attn_q.bias", "qwen2"), "model.layers.1.self_attn.q_proj.bias");
  bool is_k = false;
  EXPECT_TRUE(is_gguf_qk_projection("blk.0.attn_q.weight", &is_k, "llama"));
  EXPECT_FALSE(is_gguf_qk_projection("blk.0.attn_q.weight", &is_k, "qwen2"));
  EXPECT_FALSE(is_gguf_qk_projection("blk.0.attn_k.weight", &is_k, "gemma2"));
}

}  // namespace
}  // namespace tessera
