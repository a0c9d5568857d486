#include "runtime/model/llama.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/graph_step.h"
#include "runtime/model/rope.h"
#include "base/status_macros.h"

namespace tessera {

namespace {

std::string layer_name(int64_t i, std::string_view suffix) {
  return absl::StrCat("model.layers.", i, ".", std::string(suffix));
}

}  // namespace

namespace {

// A number no other graph key owner in this process has had (graph_key keeps 16 bits of it).
uint32_t next_graph_owner() {
  static std::atomic<uint32_t> next{0};
  return next++;
}

}  // namespace

LlamaModel::LlamaModel(ModelConfig config, ForwardLimits limits, ExecutionOptions execution)
    : config_(std::move(config)), limits_(limits), execution_(std::move(execution)),
      id_(next_graph_owner()) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::load(const WeightSource& weights,
                                                             Backend& backend,
                                                             ForwardLimits limits) {
  const int32_t layers = static_cast<int32_t>(weights.config().num_layers);
  return load(weights, {LayerSegment{&backend, 0, layers}}, limits, ExecutionOptions{});
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::load(const WeightSource& weights,
                                                             std::vector<LayerSegment> segments,
                                                             ForwardLimits limits,
                                                             ExecutionOptions execution) {
  const ModelConfig& config = weights.config();
  if (absl::Status s = config.validate(); !s.ok()) return s;
  if (limits.max_batch_tokens <= 0 || limits.max_logit_rows <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batch_tokens (", limits.max_batch_tokens, ") and max_logit_rows (",
        limits.max_logit_rows, ") must be positive"));
  }
  if (execution.micro_batches < 1 || execution.min_micro_batch_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro_batches (", execution.micro_batches, ") and min_micro_batch_tokens (",
        execution.min_micro_batch_tokens, ") must be positive counts"));
  }
  if (execution.gemm_buckets) TESSERA_RETURN_IF_ERROR(execution.gemm_buckets->validate());
  if (config.vocab_size > kMaxSamplingVocab) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", config.vocab_size,
                                                   " exceeds the sampler's limit of ",
                                                   kMaxSamplingVocab));
  }
  TESSERA_RETURN_IF_ERROR(validate_segments(segments, static_cast<int32_t>(config.num_layers)));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, limits, std::move(execution)));
  model->segments_ = std::move(segments);
  for (const LayerSegment& seg : model->segments_) model->stages_.push_back(Stage{seg, {}, {}});
  TESSERA_RETURN_IF_ERROR(model->load_weights(weights));
  const Capacity cap = capacity(model->limits_, model->execution_);
  for (size_t s = 0; s < model->stages_.size(); ++s) {
    TESSERA_RETURN_IF_ERROR(
        model->allocate_activations(model->stages_[s], cap, s + 1 == model->stages_.size()));
  }
  // Graphs run where asked and every stage records them.
  const DecodeGraphs graphs = model->execution_.decode_graphs;
  const bool recorded = std::all_of(model->stages_.begin(), model->stages_.end(),
                                    [](const Stage& st) { return st.segment.backend->records_graphs(); });
  if (graphs == DecodeGraphs::kAlways || (graphs == DecodeGraphs::kAuto && recorded)) {
    // The largest bucket whose padded step fits the activations.
    model->graph_buckets_ = *padding_buckets(model->execution_);
    for (int64_t b : model->graph_buckets_.decode) {
      if (b <= cap.tokens && b <= cap.logit_rows) model->largest_graph_bucket_ = b;
    }
  }
  return model;
}

namespace {

// Elements of each decoder layer's weights, as load_weights() stores them.
int64_t layer_elements(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q_width = c.num_heads * c.head_dim;
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return 2 * h + qkv_rows * h + h * q_width + 3 * c.intermediate_size * h;
}

}  // namespace

ModelFootprint LlamaModel::footprint(const ModelConfig& c, DType dtype) {
  const uint64_t es = element_size(dtype);
  ModelFootprint f;
  f.embedding_bytes = static_cast<uint64_t>(c.vocab_size * c.hidden_size) * es;
  f.layer_bytes.assign(static_cast<size_t>(c.num_layers), static_cast<uint64_t>(layer_elements(c)) * es);
  f.final_norm_bytes = static_cast<uint64_t>(c.hidden_size) * es;
  f.tied_embeddings = c.tie_word_embeddings;
  f.lm_head_bytes = c.tie_word_embeddings ? 0 : f.embedding_bytes;
  f.kv_bytes_per_token_per_layer =
      kv_bytes_per_token_per_layer(c.num_kv_heads, c.head_dim, dtype);
  return f;
}

std::optional<TokenBuckets> LlamaModel::padding_buckets(const ExecutionOptions& execution) {
  if (execution.gemm_buckets) return execution.gemm_buckets;
  if (execution.decode_graphs != DecodeGraphs::kOff) return TokenBuckets{};
  return std::nullopt;
}

LlamaModel::Capacity LlamaModel::capacity(const ForwardLimits& limits,
                                          const ExecutionOptions& execution) {
  Capacity cap{limits.max_batch_tokens, limits.max_logit_rows};
  const std::optional<TokenBuckets> buckets = padding_buckets(execution);
  if (!buckets) return cap;
  // A part ends at most at the limit; its padding reaches past it by at most this much.
  const TokenBuckets& b = *buckets;
  // Past the largest decode bucket both paddings repeat with period prefill_pad: every value
  // they take shows up by then.
  const int64_t period_end = b.decode.back() + b.prefill_pad;
  int64_t token_pad = 0, row_pad = 0;
  for (int64_t n = 1; n <= std::min<int64_t>(limits.max_batch_tokens, period_end); ++n) {
    token_pad = std::max({token_pad, padded_step_tokens(b, n, true) - n,
                          padded_step_tokens(b, n, false) - n});
  }
  for (int64_t r = 1; r <= std::min<int64_t>(limits.max_logit_rows, period_end); ++r) {
    row_pad = std::max(row_pad, decode_bucket(b, r) - r);
  }
  return Capacity{cap.tokens + token_pad, cap.logit_rows + row_pad};
}

uint64_t LlamaModel::activation_bytes(const ModelConfig& c, const ForwardLimits& limits,
                                      const ExecutionOptions& execution, DType dtype) {
  const Capacity cap = capacity(limits, execution);
  const int64_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  // residual, normed, proj; qkv; attn; gate_up; act -- as allocate_activations() sizes them.
  const int64_t per_token = 3 * c.hidden_size + qkv + c.num_heads * c.head_dim + 3 * c.intermediate_size;
  return static_cast<uint64_t>(cap.tokens * per_token) * element_size(dtype);
}

uint64_t LlamaModel::head_activation_bytes(const ModelConfig& c, const ForwardLimits& limits,
                                           const ExecutionOptions& execution, DType dtype) {
  const int64_t rows = capacity(limits, execution).logit_rows;
  // last; logits; sampled -- as allocate_activations() sizes them on the last stage.
  return static_cast<uint64_t>(rows * c.hidden_size) * element_size(dtype) +
         static_cast<uint64_t>(rows * c.vocab_size) * sizeof(float) +
         static_cast<uint64_t>(rows) * sizeof(int32_t);
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

absl::StatusOr<Tensor> LlamaModel::allocate(Backend& backend, DType dtype,
                                             std::initializer_list<int64_t> dims) {
  Tensor t(nullptr, dtype, dims);
  auto buffer = backend.allocate(t.nbytes());
  if (!buffer.ok()) return buffer.status();
  t.data = buffer->data();
  buffers_.push_back(*std::move(buffer));
  return t;
}

// Loads `names` stacked along the first dimension into one tensor of shape `dims` (a fused
// weight when there are several names).
absl::StatusOr<Tensor> LlamaModel::load_tensor(Backend& backend, const WeightSource& weights,
                                               std::initializer_list<std::string_view> names,
                                               std::initializer_list<int64_t> dims) {
  absl::StatusOr<Tensor> t = allocate(backend, backend.compute_dtype(), dims);
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
    TESSERA_RETURN_IF_ERROR(backend.load_weight(weights, name, t->rows(row, rows)));
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
  Backend& first = *stages_.front().segment.backend;
  Backend& last = *stages_.back().segment.backend;

  TESSERA_ASSIGN_OR_RETURN(embed_, load_tensor(first, weights, {"model.embed_tokens.weight"}, {c.vocab_size, h}));
  TESSERA_ASSIGN_OR_RETURN(final_norm_, load_tensor(last, weights, {"model.norm.weight"}, {h}));
  if (c.tie_word_embeddings && &first == &last) {
    lm_head_ = embed_;
  } else {
    // Untied, or tied with the head on another device than the embeddings: that device holds
    // its own copy of the (shared) matrix.
    const std::string_view name = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    TESSERA_ASSIGN_OR_RETURN(lm_head_, load_tensor(last, weights, {name}, {c.vocab_size, h}));
  }
  layers_.resize(c.num_layers);
  for (Stage& stage : stages_) {
    Backend& b = *stage.segment.backend;
    for (int64_t i = stage.segment.first_layer; i < stage.segment.end_layer(); ++i) {
      Layer& l = layers_[i];
      const std::string q = layer_name(i, "self_attn.q_proj.weight");
      const std::string k = layer_name(i, "self_attn.k_proj.weight");
      const std::string v = layer_name(i, "self_attn.v_proj.weight");
      const std::string gate = layer_name(i, "mlp.gate_proj.weight");
      const std::string up = layer_name(i, "mlp.up_proj.weight");
      TESSERA_ASSIGN_OR_RETURN(l.input_norm, load_tensor(b, weights, {layer_name(i, "input_layernorm.weight")}, {h}));
      TESSERA_ASSIGN_OR_RETURN(l.qkv, load_tensor(b, weights, {q, k, v}, {qkv_rows, h}));
      TESSERA_ASSIGN_OR_RETURN(l.o, load_tensor(b, weights, {layer_name(i, "self_attn.o_proj.weight")}, {h, q_width}));
      TESSERA_ASSIGN_OR_RETURN(l.post_norm,
                               load_tensor(b, weights, {layer_name(i, "post_attention_layernorm.weight")}, {h}));
      TESSERA_ASSIGN_OR_RETURN(l.gate_up, load_tensor(b, weights, {gate, up}, {2 * c.intermediate_size, h}));
      TESSERA_ASSIGN_OR_RETURN(l.down, load_tensor(b, weights, {layer_name(i, "mlp.down_proj.weight")},
                                                   {h, c.intermediate_size}));
    }
    const std::vector<float> inv_freq = rope_inv_freq(c);
    TESSERA_ASSIGN_OR_RETURN(stage.inv_freq,
                             allocate(b, DType::kF32, {static_cast<int64_t>(inv_freq.size())}));
    b.upload_f32(inv_freq, stage.inv_freq);
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::allocate_activations(Stage& stage, const Capacity& cap, bool last) {
  const ModelConfig& c = config_;
  Backend& b = *stage.segment.backend;
  Activations& act = stage.act;
  const DType dt = b.compute_dtype();
  const int64_t n = cap.tokens;
  TESSERA_ASSIGN_OR_RETURN(act.residual, allocate(b, dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.normed, allocate(b, dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.qkv, allocate(b, dt, {n, attention_shape().qkv_width()}));
  TESSERA_ASSIGN_OR_RETURN(act.attn, allocate(b, dt, {n, c.num_heads * c.head_dim}));
  TESSERA_ASSIGN_OR_RETURN(act.proj, allocate(b, dt, {n, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.gate_up, allocate(b, dt, {n, 2 * c.intermediate_size}));
  TESSERA_ASSIGN_OR_RETURN(act.act, allocate(b, dt, {n, c.intermediate_size}));
  if (!last) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(act.last, allocate(b, dt, {cap.logit_rows, c.hidden_size}));
  TESSERA_ASSIGN_OR_RETURN(act.logits, allocate(b, DType::kF32, {cap.logit_rows, c.vocab_size}));
  TESSERA_ASSIGN_OR_RETURN(sampled_, allocate(b, DType::kI32, {cap.logit_rows}));
  return absl::OkStatus();
}

int64_t LlamaModel::gemm_rows(const StepBatch& part) const {
  const int64_t n = part.num_tokens();
  if (!execution_.gemm_buckets) return n;
  bool has_prefill = false;
  for (int32_t q = 0; q < part.num_seqs() && !has_prefill; ++q) {
    has_prefill = part.query_start[q + 1] - part.query_start[q] > 1;
  }
  return padded_step_tokens(*execution_.gemm_buckets, n, has_prefill);
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
  // Every stage's errors, the first one reported.
  absl::Status status;
  if (runs_as_graph(batch)) {
    status = run_graph_step(batch, cache);
  } else if (const int32_t parts = micro_batches(batch); parts > 1) {
    split_step_batch(batch, parts, &parts_);
    ++micro_batched_steps_;
    for (const StepBatchPart& part : parts_) {
      const int64_t m = gemm_rows(part.batch);
      for (size_t s = 0; s < stages_.size(); ++s) {
        stages_[s].segment.backend->begin_step(part.batch);
        receive_residual(s, part.first_token, part.batch.num_tokens());
        run_stage(s, part.batch, m, part.first_token, part.first_logit_row, cache);
      }
    }
  } else {
    const int64_t m = gemm_rows(batch);
    for (size_t s = 0; s < stages_.size(); ++s) {
      stages_[s].segment.backend->begin_step(batch);
      receive_residual(s, 0, n);
      run_stage(s, batch, m, 0, 0, cache);
    }
  }
  const Stage& last = stages_.back();
  Backend& b = *last.segment.backend;
  const Tensor logits = last.act.logits.rows(0, n_logits);
  const Tensor tokens = sampled_.rows(0, n_logits);
  // Only the int32 tokens cross to the host, not n_logits rows of vocab fp32 logits.
  if (sampled && status.ok()) b.sample(logits, output.rows, tokens);
  for (const Stage& stage : stages_) status.Update(stage.segment.backend->synchronize());
  if (!status.ok() || n_logits == 0) return status;
  if (sampled) {
    b.copy_to_host(output.tokens.data(), tokens.data, tokens.nbytes());
  } else {
    b.copy_to_host(output.logits.data(), logits.data, logits.nbytes());
  }
  return b.synchronize();
}

int32_t LlamaModel::micro_batches(const StepBatch& batch) const {
  if (stages_.size() < 2) return 1;
  return std::min(execution_.micro_batches, batch.num_tokens() / execution_.min_micro_batch_tokens);
}

bool LlamaModel::runs_as_graph(const StepBatch& batch) const {
  return batch.num_tokens() <= largest_graph_bucket_ && is_decode_step(batch);
}

absl::Status LlamaModel::run_graph_step(const StepBatch& batch, const KvCache& cache) {
  const int32_t bucket =
      static_cast<int32_t>(decode_bucket(graph_buckets_, batch.num_tokens()));
  const int32_t max_context = graph_context_class(batch);
  // Recordings point into the cache they ran with: another cache takes fresh keys.
  if (cache.id() != graph_cache_) {
    if (graph_cache_ != 0) id_ = next_graph_owner();
    graph_cache_ = cache.id();
  }
  pad_decode_step(batch, bucket, max_context, cache.block_size(), &graph_batch_);
  absl::Status status;
  for (size_t s = 0; s < stages_.size() && status.ok(); ++s) {
    Backend& b = *stages_[s].segment.backend;
    b.begin_graph_step(graph_batch_, max_context);
    // The hop between devices stays outside the recordings: each is one device's work.
    receive_residual(s, 0, bucket);
    status = b.run_graph(graph_key(id_, s, bucket, max_context),
                         [&] { run_stage(s, graph_batch_, bucket, 0, 0, cache); });
  }
  if (status.ok()) ++graph_steps_;
  return status;
}

void LlamaModel::receive_residual(size_t s, int64_t first_token, int64_t n) {
  if (s == 0) return;
  const Stage& prev = stages_[s - 1];
  const Tensor residual = stages_[s].act.residual.rows(first_token, n);
  prev.segment.backend->copy_to(*stages_[s].segment.backend, residual.data,
                                prev.act.residual.rows(first_token, n).data, residual.nbytes());
}

void LlamaModel::run_stage(size_t s, const StepBatch& part, int64_t m, int64_t first_token,
                           int64_t first_logit_row, const KvCache& cache) {
  const Stage& stage = stages_[s];
  Backend& b = *stage.segment.backend;
  const Activations& a = stage.act;
  const AttentionShape shape = attention_shape();
  const float eps = config_.rms_norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  const int64_t n = part.num_tokens();

  // This part's rows; GEMMs run over `m` of them (the padding rows belong to no one).
  const Tensor residual = a.residual.rows(first_token, n), normed = a.normed.rows(first_token, n);
  const Tensor qkv = a.qkv.rows(first_token, n), attn = a.attn.rows(first_token, n);
  const Tensor proj = a.proj.rows(first_token, n), act = a.act.rows(first_token, n);
  const Tensor gate_up = a.gate_up.rows(first_token, n);
  auto padded = [&](const Tensor& t) { return t.rows(first_token, m); };

  if (s == 0) b.embedding(embed_, residual);
  for (int32_t i = stage.segment.first_layer; i < stage.segment.end_layer(); ++i) {
    const Layer& l = layers_[i];
    const KvLayerView kv = cache.layer(i);
    // The previous layer's MLP output joins the residual stream inside the fused norm; a stage's
    // first layer receives the stream complete.
    if (i == stage.segment.first_layer) {
      b.rms_norm(residual, l.input_norm, eps, normed);
    } else {
      b.add_rms_norm(residual, proj, l.input_norm, eps, normed);
    }
    b.linear(padded(a.normed), l.qkv, padded(a.qkv));
    b.rope_and_cache(qkv, stage.inv_freq, shape, kv);
    b.attention(qkv, kv, shape, scale, attn);
    b.linear(padded(a.attn), l.o, padded(a.proj));
    b.add_rms_norm(residual, proj, l.post_norm, eps, normed);
    b.linear(padded(a.normed), l.gate_up, padded(a.gate_up));
    b.silu_mul(gate_up, act);
    b.linear(padded(a.act), l.down, padded(a.proj));
  }
  const Layer& last_layer = layers_[stage.segment.end_layer() - 1];
  if (s + 1 < stages_.size()) {
    // Complete the residual stream before it travels: the backends' only residual add is the
    // fused one, whose normalized output is not needed here.
    b.add_rms_norm(residual, proj, last_layer.post_norm, eps, normed);
    return;
  }
  const int64_t n_logits = static_cast<int64_t>(part.logits_rows.size());
  if (n_logits == 0) return;
  b.add_rms_norm(residual, proj, final_norm_, eps, normed);
  b.gather_logit_rows(normed, a.last.rows(first_logit_row, n_logits));
  const int64_t rows =
      execution_.gemm_buckets ? decode_bucket(*execution_.gemm_buckets, n_logits) : n_logits;
  b.linear(a.last.rows(first_logit_row, rows), lm_head_, a.logits.rows(first_logit_row, rows));
}

}  // namespace tessera
