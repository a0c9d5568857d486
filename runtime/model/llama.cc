#include "runtime/model/llama.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/model/rope.h"
#include "runtime/status_macros.h"

namespace tessera {

namespace {

std::string layer_name(int64_t i, std::string_view suffix) {
  return absl::StrCat("model.layers.", i, ".", std::string(suffix));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::load(const WeightSource& weights,
                                                             Backend& backend,
                                                             ForwardLimits limits) {
  const ModelConfig& config = weights.config();
  if (absl::Status s = config.validate(); !s.ok()) return s;
  if (limits.max_batch_tokens <= 0 || limits.max_logit_rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_tokens (", limits.max_batch_tokens, ") and max_logit_rows (",
        limits.max_logit_rows, ") must be positive"));
  }
  if (config.vocab_size > kMaxSamplingVocab) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", config.vocab_size,
                                                   " exceeds the sampler's limit of ",
                                                   kMaxSamplingVocab));
  }
  std::unique_ptr<LlamaModel> model(new LlamaModel(backend, config, limits));
  TESSERA_RETURN_IF_ERROR(model->load_weights(weights));
  TESSERA_RETURN_IF_ERROR(model->allocate_activations());
  TESSERA_ASSIGN_OR_RETURN(model->sampled_, model->allocate(DType::kI32, {limits.max_logit_rows}));
  return model;
}

AttentionShape LlamaModel::attention_shape() const {
  return AttentionShape{static_cast<int32_t>(config_.num_heads),
                        static_cast<int32_t>(config_.num_kv_heads),
                        static_cast<int32_t>(config_.head_dim)};
}

KvCacheShape LlamaModel::kv_cache_shape(int32_t num_blocks, int32_t block_size) const {
  return KvCacheShape{static_cast<int32_t>(config_.num_layers), num_blocks, block_size,
                      static_cast<int32_t>(config_.num_kv_heads),
                      static_cast<int32_t>(config_.head_dim)};
}

absl::StatusOr<Tensor> LlamaModel::allocate(DType dtype, std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  auto buffer = backend_.allocate(t.nbytes());
  if (!buffer.ok()) return buffer.status();
  t.data = buffer->data();
  buffers_.push_back(*std::move(buffer));
  return t;
}

// Loads `names` stacked along the first dimension into one tensor of shape `dims` (a fused
// weight when there are several names).
absl::StatusOr<Tensor> LlamaModel::load_tensor(const WeightSource& weights,
                                               std::initializer_list<std::string_view> names,
                                               std::initializer_list<int64_t> dims) {
  absl::StatusOr<Tensor> t = allocate(backend_.compute_dtype(), dims);
  if (!t.ok()) return t.status();
  const int64_t rows_each = t->dim(0) / static_cast<int64_t>(names.size());
  int64_t row = 0;
  for (std::string_view name : names) {
    // Parts of a fused weight may differ in rows (q vs k/v): take each one's stored rows.
    int64_t rows = rows_each;
    if (names.size() > 1) {
      auto raw = weights.raw(name);
      if (!raw.ok()) return raw.status();
      rows = raw->info.shape.empty() ? 0 : raw->info.shape[0];
      if (row + rows > t->dim(0)) {
        return absl::InvalidArgumentError(absl::StrCat(weights.path(), ": tensor ", std::string(name), " has ",
                                                       rows, " rows; the fused weight has room for ",
                                                       t->dim(0) - row));
      }
    }
    TESSERA_RETURN_IF_ERROR(backend_.load_weight(weights, name, t->rows(row, rows)));
    row += rows;
  }
  if (row != t->dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(weights.path(), ": fused weight ", std::string(*names.begin()),
                                                   "... has ", row, " rows, expected ", t->dim(0)));
  }
  weight_bytes_ += t->nbytes();
  return t;
}

absl::Status LlamaModel::load_weights(const WeightSource& weights) {
  const ModelConfig& c = config_;
  const int64_t h = c.hidden_size, q_width = c.num_heads * c.head_dim;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;

  TESSERA_ASSIGN_OR_RETURN(embed_, load_tensor(weights, {"model.embed_tokens.weight"}, {c.vocab_size, h}));
  TESSERA_ASSIGN_OR_RETURN(final_norm_, load_tensor(weights, {"model.norm.weight"}, {h}));
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;
  } else {
    TESSERA_ASSIGN_OR_RETURN(lm_head_, load_tensor(weights, {"lm_head.weight"}, {c.vocab_size, h}));
  }
  layers_.resize(c.num_layers);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    Layer& l = layers_[i];
    const std::string q = layer_name(i, "self_attn.q_proj.weight");
    const std::string k = layer_name(i, "self_attn.k_proj.weight");
    const std::string v = layer_name(i, "self_attn.v_proj.weight");
    const std::string gate = layer_name(i, "mlp.gate_proj.weight");
    const std::string up = layer_name(i, "mlp.up_proj.weight");
    TESSERA_ASSIGN_OR_RETURN(l.input_norm, load_tensor(weights, {layer_name(i, "input_layernorm.weight")}, {h}));
    TESSERA_ASSIGN_OR_RETURN(l.qkv, load_tensor(weights, {q, k, v}, {qkv_rows, h}));
    TESSERA_ASSIGN_OR_RETURN(l.o, load_tensor(weights, {layer_name(i, "self_attn.o_proj.weight")}, {h, q_width}));
    TESSERA_ASSIGN_OR_RETURN(l.post_norm,
                   load_tensor(weights, {layer_name(i, "post_attention_layernorm.weight")}, {h}));
    TESSERA_ASSIGN_OR_RETURN(l.gate_up, load_tensor(weights, {gate, up}, {2 * c.intermediate_size, h}));
    TESSERA_ASSIGN_OR_RETURN(l.down, load_tensor(weights, {layer_name(i, "mlp.down_proj.weight")},
                                       {h, c.intermediate_size}));
  }
  const std::vector<float> inv_freq = rope_inv_freq(c);
  TESSERA_ASSIGN_OR_RETURN(inv_freq_, allocate(DType::kF32, {static_cast<int64_t>(inv_freq.size())}));
  backend_.upload_f32(inv_freq, inv_freq_);
  return absl::OkStatus();
}

absl::Status LlamaModel::allocate_activations() {
  const ModelConfig& c = config_;
  const DType dt = backend_.compute_dtype();
  const int64_t n = limits_.max_batch_tokens, rows = limits_.max_logit_rows;
  TESSERA_ASSIGN_OR_RETURN(act_.residual, allocate(dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.normed, allocate(dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.qkv, allocate(dt, {n, attention_shape().qkv_width()}));
  TESSERA_ASSIGN_OR_RETURN(act_.attn, allocate(dt, {n, c.num_heads * c.head_dim}));
  TESSERA_ASSIGN_OR_RETURN(act_.proj, allocate(dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.gate_up, allocate(dt, {n, 2 * c.intermediate_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.act, allocate(dt, {n, c.intermediate_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.last, allocate(dt, {rows, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act_.logits, allocate(DType::kF32, {rows, c.vocab_size}));
  return absl::OkStatus();
}

absl::Status LlamaModel::forward(const StepBatch& batch, const KvCache& cache,
                                 std::span<float> logits) {
  return run_step(batch, cache, StepOutput{logits, {}, {}});
}

absl::Status LlamaModel::forward_sampled(const StepBatch& batch, const KvCache& cache,
                                         std::span<const SamplingRow> rows,
                                         std::span<int32_t> tokens) {
  return run_step(batch, cache, StepOutput{{}, rows, tokens});
}

absl::Status LlamaModel::run_step(const StepBatch& batch, const KvCache& cache,
                                  const StepOutput& output) {
  const int64_t n = batch.num_tokens();
  const int64_t n_logits = static_cast<int64_t>(batch.logits_rows.size());
  const bool sampled = output.logits.empty() && n_logits > 0;
  const bool shaped = sampled ? static_cast<int64_t>(output.rows.size()) == n_logits &&
                                    static_cast<int64_t>(output.tokens.size()) == n_logits
                              : static_cast<int64_t>(output.logits.size()) ==
                                    n_logits * config_.vocab_size;
  if (n <= 0 || n > limits_.max_batch_tokens || n_logits > limits_.max_logit_rows || !shaped) {
    return absl::InternalError(absl::StrCat("forward: batch of ", n, " tokens and ", n_logits,
                                            " logit rows exceeds the limits (",
                                            limits_.max_batch_tokens, ", ", limits_.max_logit_rows,
                                            ") or the logits, rows or tokens span is misshapen"));
  }
  const AttentionShape shape = attention_shape();
  const float eps = config_.rms_norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  Backend& b = backend_;

  // Views of this step's rows.
  const Tensor residual = act_.residual.rows(0, n), normed = act_.normed.rows(0, n);
  const Tensor qkv = act_.qkv.rows(0, n), attn = act_.attn.rows(0, n), proj = act_.proj.rows(0, n);
  const Tensor gate_up = act_.gate_up.rows(0, n), act = act_.act.rows(0, n);

  b.begin_step(batch);
  b.embedding(embed_, residual);
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const Layer& l = layers_[i];
    const KvLayerView kv = cache.layer(static_cast<int32_t>(i));
    // The previous layer's MLP output joins the residual stream inside the fused norm.
    if (i == 0) {
      b.rms_norm(residual, l.input_norm, eps, normed);
    } else {
      b.add_rms_norm(residual, proj, l.input_norm, eps, normed);
    }
    b.linear(normed, l.qkv, qkv);
    b.rope_and_cache(qkv, inv_freq_, shape, kv);
    b.attention(qkv, kv, shape, scale, attn);
    b.linear(attn, l.o, proj);
    b.add_rms_norm(residual, proj, l.post_norm, eps, normed);
    b.linear(normed, l.gate_up, gate_up);
    b.silu_mul(gate_up, act);
    b.linear(act, l.down, proj);
  }
  if (n_logits == 0) return b.synchronize();
  b.add_rms_norm(residual, proj, final_norm_, eps, normed);
  const Tensor last = act_.last.rows(0, n_logits);
  b.gather_logit_rows(normed, last);
  const Tensor out = act_.logits.rows(0, n_logits);
  b.linear(last, lm_head_, out);
  if (sampled) {
    // Only the int32 tokens cross to the host, not n_logits rows of vocab fp32 logits.
    const Tensor tokens = sampled_.rows(0, n_logits);
    b.sample(out, output.rows, tokens);
    TESSERA_RETURN_IF_ERROR(b.synchronize());
    b.copy_to_host(output.tokens.data(), tokens.data, tokens.nbytes());
  } else {
    TESSERA_RETURN_IF_ERROR(b.synchronize());
    b.copy_to_host(output.logits.data(), out.data, out.nbytes());
  }
  return b.synchronize();
}

}  // namespace tessera
