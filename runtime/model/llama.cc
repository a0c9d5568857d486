#include "runtime/model/llama.h"

#include <cmath>

#include "base/status_macros.h"
#include "runtime/model/rope.h"
#include "runtime/model/weight_loader.h"

namespace tessera {

namespace {

// Elements of each decoder layer's weights, as load_weights() stores them.
int64_t layer_elements(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q_width = c.num_heads * c.head_dim;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return 2 * h + qkv_rows * h + h * q_width + 3 * c.intermediate_size * h;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::load(const WeightSource& weights,
                                                             std::vector<LayerSegment> segments) {
  const ModelConfig& config = weights.config();
  TESSERA_RETURN_IF_ERROR(config.validate());
  TESSERA_RETURN_IF_ERROR(validate_segments(segments, static_cast<int32_t>(config.num_layers)));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config));
  TESSERA_RETURN_IF_ERROR(model->load_weights(weights, segments));
  return model;
}

ModelFootprint LlamaModel::footprint(const ModelConfig& c, DType dtype) {
  const uint64_t es = element_size(dtype);
  ModelFootprint f;
  f.embedding_bytes = static_cast<uint64_t>(c.vocab_size * c.hidden_size) * es;
  f.layer_bytes.assign(static_cast<size_t>(c.num_layers), static_cast<uint64_t>(layer_elements(c)) * es);
  f.final_norm_bytes = static_cast<uint64_t>(c.hidden_size) * es;
  f.tied_embeddings = c.tie_word_embeddings;
  f.lm_head_bytes = c.tie_word_embeddings ? 0 : f.embedding_bytes;
  f.kv_bytes_per_token_per_layer = kv_bytes_per_token_per_layer(c.num_kv_heads, c.head_dim, dtype);
  return f;
}

ActivationCost LlamaModel::activation_cost(const ModelConfig& c, DType dtype) {
  const int64_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  // normed, proj; qkv; attn; gate_up; act; and last -- as allocate_activations() sizes them.
  const int64_t per_token = 2 * c.hidden_size + qkv + c.num_heads * c.head_dim + 3 * c.intermediate_size;
  return ActivationCost{.per_token = static_cast<uint64_t>(per_token) * element_size(dtype),
                        .per_logit_row = static_cast<uint64_t>(c.hidden_size) * element_size(dtype)};
}

AttentionShape LlamaModel::attention_shape() const {
  return AttentionShape{static_cast<int32_t>(config_.num_heads),
                        static_cast<int32_t>(config_.num_kv_heads),
                        static_cast<int32_t>(config_.head_dim), config_.rope_style};
}

KvCacheShape LlamaModel::kv_cache_shape(int32_t num_blocks, int32_t block_size) const {
  return KvCacheShape{static_cast<int32_t>(config_.num_layers), num_blocks, block_size,
                      static_cast<int32_t>(config_.num_kv_heads),
                      static_cast<int32_t>(config_.head_dim)};
}

absl::Status LlamaModel::load_weights(const WeightSource& weights,
                                      const std::vector<LayerSegment>& segments) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size, q_width = c.num_heads * c.head_dim;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  Backend& first = *segments.front().backend;
  Backend& last = *segments.back().backend;
  WeightLoader loader(weights, arena_);

  TESSERA_ASSIGN_OR_RETURN(embed_, loader.load(first, {"model.embed_tokens.weight"}, {c.vocab_size, h}));
  TESSERA_ASSIGN_OR_RETURN(final_norm_, loader.load(last, {"model.norm.weight"}, {h}));
  if (c.tie_word_embeddings && &first == &last) {
    lm_head_ = embed_;
  } else {
    // Untied, or tied with the head on another device than the embeddings: that device holds
    // its own copy of the (shared) matrix.
    const std::string_view name = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    TESSERA_ASSIGN_OR_RETURN(lm_head_, loader.load(last, {name}, {c.vocab_size, h}));
  }
  layers_.resize(c.num_layers);
  for (const LayerSegment& seg : segments) {
    Backend& b = *seg.backend;
    for (int64_t i = seg.first_layer; i < seg.end_layer(); ++i) {
      Layer& l = layers_[i];
      auto name = [i](std::string_view suffix) { return layer_weight_name(i, suffix); };
      TESSERA_ASSIGN_OR_RETURN(l.input_norm, loader.load(b, {name("input_layernorm.weight")}, {h}));
      TESSERA_ASSIGN_OR_RETURN(l.qkv, loader.load(b, {name("self_attn.q_proj.weight"),
                                                      name("self_attn.k_proj.weight"),
                                                      name("self_attn.v_proj.weight")},
                                                  {qkv_rows, h}));
      TESSERA_ASSIGN_OR_RETURN(l.o, loader.load(b, {name("self_attn.o_proj.weight")}, {h, q_width}));
      TESSERA_ASSIGN_OR_RETURN(l.post_norm, loader.load(b, {name("post_attention_layernorm.weight")}, {h}));
      TESSERA_ASSIGN_OR_RETURN(l.gate_up, loader.load(b, {name("mlp.gate_proj.weight"),
                                                          name("mlp.up_proj.weight")},
                                                      {2 * c.intermediate_size, h}));
      TESSERA_ASSIGN_OR_RETURN(l.down, loader.load(b, {name("mlp.down_proj.weight")},
                                                   {h, c.intermediate_size}));
    }
    Stage stage;
    const std::vector<float> inv_freq = rope_inv_freq(c);
    TESSERA_ASSIGN_OR_RETURN(stage.inv_freq,
                             arena_.allocate(b, DType::kF32, {static_cast<int64_t>(inv_freq.size())}));
    b.upload_f32(inv_freq, stage.inv_freq);
    stages_.push_back(stage);
  }
  weight_bytes_ = loader.bytes_loaded();
  return absl::OkStatus();
}

absl::Status LlamaModel::allocate_activations(int32_t stage, const LayerSegment& segment,
                                              int64_t rows, int64_t logit_rows, bool last) {
  const ModelConfig& c = config_;
  Backend& b = *segment.backend;
  Activations& act = stages_[stage].act;
  const DType dt = b.compute_dtype();
  TESSERA_ASSIGN_OR_RETURN(act.normed, arena_.allocate(b, dt, {rows, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.qkv, arena_.allocate(b, dt, {rows, attention_shape().qkv_width()}));
  TESSERA_ASSIGN_OR_RETURN(act.attn, arena_.allocate(b, dt, {rows, c.num_heads * c.head_dim}));
  TESSERA_ASSIGN_OR_RETURN(act.proj, arena_.allocate(b, dt, {rows, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.gate_up, arena_.allocate(b, dt, {rows, 2 * c.intermediate_size}));
  TESSERA_ASSIGN_OR_RETURN(act.act, arena_.allocate(b, dt, {rows, c.intermediate_size}));
  if (!last) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(act.last, arena_.allocate(b, dt, {logit_rows, c.hidden_size}));
  return absl::OkStatus();
}

void LlamaModel::run_stage(const StagePass& p) {
  Backend& b = *p.segment.backend;
  const Stage& stage = stages_[p.stage];
  const Activations& a = stage.act;
  const AttentionShape shape = attention_shape();
  const float eps = config_.rms_norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  // The pass's rows; GEMMs run over tokens.gemm of them.
  const Tensor x = p.tokens.of(p.residual), normed = p.tokens.of(a.normed);
  const Tensor qkv = p.tokens.of(a.qkv), attn = p.tokens.of(a.attn), proj = p.tokens.of(a.proj);
  const Tensor gate_up = p.tokens.of(a.gate_up), act = p.tokens.of(a.act);

  if (p.first_stage) b.embedding(embed_, x);
  for (int32_t i = p.segment.first_layer; i < p.segment.end_layer(); ++i) {
    const Layer& l = layers_[i];
    const KvLayerView kv = p.cache.layer(i);
    // The previous layer's MLP output joins the residual stream inside the fused norm; a stage's
    // first layer receives the stream complete.
    if (i == p.segment.first_layer) {
      b.rms_norm(x, l.input_norm, eps, normed);
    } else {
      b.add_rms_norm(x, proj, l.input_norm, eps, normed);
    }
    b.linear(p.tokens.gemm_of(a.normed), l.qkv, p.tokens.gemm_of(a.qkv));
    b.rope_and_cache(qkv, stage.inv_freq, shape, kv);
    b.attention(qkv, kv, shape, scale, attn);
    b.linear(p.tokens.gemm_of(a.attn), l.o, p.tokens.gemm_of(a.proj));
    b.add_rms_norm(x, proj, l.post_norm, eps, normed);
    b.linear(p.tokens.gemm_of(a.normed), l.gate_up, p.tokens.gemm_of(a.gate_up));
    b.silu_mul(gate_up, act);
    b.linear(p.tokens.gemm_of(a.act), l.down, p.tokens.gemm_of(a.proj));
  }
  const Layer& last_layer = layers_[p.segment.end_layer() - 1];
  if (!p.last_stage) {
    // Complete the residual stream before it travels: the backends' only residual add is the
    // fused one, whose normalized output is not needed here.
    b.add_rms_norm(x, proj, last_layer.post_norm, eps, normed);
    return;
  }
  if (p.logits.count == 0) return;
  b.add_rms_norm(x, proj, final_norm_, eps, normed);
  b.gather_logit_rows(normed, p.logits.of(a.last));
  b.linear(p.logits.gemm_of(a.last), lm_head_, p.logits.gemm_of(p.logit_out));
}

}  // namespace tessera
