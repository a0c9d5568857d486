#include "runtime/model/decoder_model.h"

#include <cmath>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/model/gemma.h"
#include "runtime/model/llama.h"
#include "runtime/model/rope.h"

namespace tessera {

// --- the shared layers ---------------------------------------------------------------------

StageRun::StageRun(const DecoderModel& model, const StagePass& pass)
    : model_(model), pass_(pass), b_(pass.segment.rank_backend(pass.rank)),
      comm_(pass.segment.comm(pass.rank)) {
  const DecoderModel::Activations& a = model.stages_[pass.stage][pass.rank].act;
  const PassRows& rows = pass.tokens;
  x_ = rows.of(pass.residual);
  normed_ = rows.of(a.normed);
  qkv_ = rows.of(a.qkv);
  attn_ = rows.of(a.attn);
  proj_ = rows.of(a.proj);
  gate_up_ = rows.of(a.gate_up);
  act_ = rows.of(a.act);
  if (a.sandwich.data != nullptr) sandwich_ = rows.of(a.sandwich);
  if (a.normed_fp8.data != nullptr) {
    normed_fp8_ = rows.of(a.normed_fp8);
    act_fp8_ = rows.of(a.act_fp8);
  }
}

const Tensor& StageRun::normed_for(const Tensor& reader) {
  normed_is_fp8_ = normed_fp8_.data != nullptr && b_.fp8_activations(reader, pass_.tokens.gemm);
  return normed_is_fp8_ ? normed_fp8_ : normed_;
}

Tensor StageRun::normed_gemm_rows() const {
  const DecoderModel::Activations& a = model_.stages_[pass_.stage][pass_.rank].act;
  return pass_.tokens.gemm_of(normed_is_fp8_ ? a.normed_fp8 : a.normed);
}

void StageRun::norm_input(const Tensor& w, const Tensor& reader) {
  const NormSpec norm{model_.config_.rms_norm_eps, model_.config_.norm_weight_offset};
  const Tensor& out = normed_for(reader);
  if (pending_.data == nullptr) {
    b_.rms_norm(x_, w, norm, out);
  } else if (pending_is_share_) {
    add_norm_of_share(pending_, w);
  } else {
    b_.add_rms_norm(x_, pending_, w, norm, out);
  }
  pending_ = Tensor{};
  pending_is_share_ = false;
}

void StageRun::add_norm(const Tensor& y, const Tensor& w, const Tensor& reader) {
  b_.add_rms_norm(x_, y, w, NormSpec{model_.config_.rms_norm_eps, model_.config_.norm_weight_offset},
                  normed_for(reader));
}

void StageRun::add_norm_proj(const Tensor& w, const Tensor& reader) {
  if (!proj_is_share_) {
    add_norm(proj_, w, reader);
    return;
  }
  normed_for(reader);
  add_norm_of_share(proj_, w);
  proj_is_share_ = false;
}

void StageRun::add_norm_of_share(const Tensor& y, const Tensor& w) {
  const NormSpec norm{model_.config_.rms_norm_eps, model_.config_.norm_weight_offset};
  // The communicator's fused sum-and-norm writes 16-bit normed: taken over the FP8 one, as it
  // spares a whole pass too (the GEMM then quantizes normed itself).
  if (comm_->all_reduce_add_rms_norm(y, x_, w, norm, normed_)) {
    normed_is_fp8_ = false;
    return;
  }
  comm_->all_reduce_sum(y);
  b_.add_rms_norm(x_, y, w, norm, normed_is_fp8_ ? normed_fp8_ : normed_);
}

void StageRun::defer_add_proj() {
  pending_ = proj_;
  pending_is_share_ = proj_is_share_;
  proj_is_share_ = false;
}

const Tensor& StageRun::proj() {
  if (proj_is_share_) comm_->all_reduce_sum(proj_);
  proj_is_share_ = false;
  return proj_;
}

void StageRun::norm(const Tensor& y, const Tensor& w, const Tensor& out) {
  b_.rms_norm(y, w, NormSpec{model_.config_.rms_norm_eps, model_.config_.norm_weight_offset}, out);
}

void StageRun::attention(const DecoderLayer& l, int32_t i) {
  const ModelConfig& c = model_.config_;
  const DecoderModel::Stage& stage = model_.stages_[pass_.stage][pass_.rank];
  const DecoderModel::Activations& a = stage.act;
  const PassRows& rows = pass_.tokens;
  const AttentionShape shape = model_.attention_shape();
  const KvLayerView kv = pass_.cache.layer(i, pass_.rank);
  const bool sliding = c.is_sliding(i);
  QkvPrologue prologue;
  prologue.bias = l.qkv_bias.data != nullptr ? &l.qkv_bias : nullptr;
  prologue.q_norm = l.q_norm.data != nullptr ? &l.q_norm : nullptr;
  prologue.k_norm = l.k_norm.data != nullptr ? &l.k_norm : nullptr;
  prologue.norm = NormSpec{c.rms_norm_eps, c.norm_weight_offset};
  b_.linear(normed_gemm_rows(), l.qkv, rows.gemm_of(a.qkv));
  b_.rope_and_cache(qkv_, sliding ? stage.inv_freq_sliding : stage.inv_freq, shape, prologue, kv);
  b_.attention(qkv_, kv, shape, model_.attention_spec(i), attn_);
  b_.linear(rows.gemm_of(a.attn), l.o, rows.gemm_of(a.proj));
  proj_is_share_ = comm_ != nullptr;  // each rank's heads' share of o
}

void StageRun::mlp(const DecoderLayer& l) {
  const DecoderModel::Activations& a = model_.stages_[pass_.stage][pass_.rank].act;
  const PassRows& rows = pass_.tokens;
  b_.linear(normed_gemm_rows(), l.gate_up, rows.gemm_of(a.gate_up));
  const bool act_fp8 = act_fp8_.data != nullptr && b_.fp8_activations(l.down, rows.gemm);
  b_.gated_activation(gate_up_, model_.config_.activation, act_fp8 ? act_fp8_ : act_);
  b_.linear(rows.gemm_of(act_fp8 ? a.act_fp8 : a.act), l.down, rows.gemm_of(a.proj));
  proj_is_share_ = comm_ != nullptr;  // each rank's features' share of down
}

// --- the model -----------------------------------------------------------------------------

DecoderModel::DecoderModel(ModelConfig config) : config_(std::move(config)) {
  const ModelConfig& c = config_;
  // transformers: head_dim ** -0.5 (Gemma: query_pre_attn_scalar ** -0.5); yarn's factor on cos
  // and sin scales every q.k by its square.
  const float base = c.query_pre_attn_scalar > 0.0f
                         ? static_cast<float>(std::pow(static_cast<double>(c.query_pre_attn_scalar), -0.5))
                         : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const float factor = rope_attention_factor(c);
  attention_scale_ = factor == 1.0f ? base : base * factor * factor;
}

absl::StatusOr<std::unique_ptr<DecoderModel>> DecoderModel::load(const WeightSource& weights,
                                                                 std::vector<LayerSegment> segments,
                                                                 Quantization quantization,
                                                                 const QuantizationKeep& keep) {
  const ModelConfig& config = weights.config();
  TESSERA_RETURN_IF_ERROR(config.validate());
  TESSERA_RETURN_IF_ERROR(keep.check_layers(config.num_layers));
  TESSERA_RETURN_IF_ERROR(validate_segments(segments, static_cast<int32_t>(config.num_layers)));
  TESSERA_RETURN_IF_ERROR(check_tensor_parallel(config, segments.front().num_ranks()));
  for (const LayerSegment& seg : segments) {
    for (int32_t r = 0; r < seg.num_ranks(); ++r) {
      TESSERA_RETURN_IF_ERROR(seg.rank_backend(r).supports(quantization));
    }
  }
  if (quantization == Quantization::kFp8) {
    TESSERA_RETURN_IF_ERROR(check_fp8_linear_shapes(
        config, tensor_parallel_shard(config, 0, segments.front().num_ranks()), keep));
  }
  std::unique_ptr<DecoderModel> model;
  const std::string& family = config.architecture;
  if (family == "gemma2" || family == "gemma3") {
    model = std::make_unique<GemmaModel>(config);
  } else if (family == "llama" || family == "mistral" || family == "qwen2" || family == "qwen3" ||
             family == "phi3") {
    model = std::make_unique<LlamaModel>(config);
  } else {
    return absl::InvalidArgumentError(str_cat("architecture '", family,
                                              "' has no forward (supported: ",
                                              absl::StrJoin(supported_architectures(), ", "), ")"));
  }
  TESSERA_RETURN_IF_ERROR(model->load_weights(weights, segments, quantization, keep));
  return model;
}

ModelFootprint DecoderModel::footprint(const ModelConfig& c, DType dtype, int32_t ranks,
                                       Quantization quantization, const QuantizationKeep& keep,
                                       std::optional<DType> kv_dtype) {
  const TensorParallelShard shard = tensor_parallel_shard(c, 0, ranks);
  const uint64_t es = element_size(dtype);
  ModelFootprint f;
  f.embedding_bytes = static_cast<uint64_t>(shard.vocab_rows * c.hidden_size) * es;
  const uint64_t all = static_cast<uint64_t>(decoder_layer_elements(c, shard)) * es;
  const auto linears = decoder_layer_linear_shapes(c, shard);
  f.layer_bytes.assign(static_cast<size_t>(c.num_layers), all);
  for (int64_t l = 0; quantization == Quantization::kFp8 && l < c.num_layers; ++l) {
    for (int p = 0; p < kLinearProjections; ++p) {
      if (keep.keeps(l, static_cast<LinearProjection>(p))) continue;
      // FP8: a byte per weight and a 4-byte scale per row instead of `es` bytes per weight.
      const uint64_t rows = static_cast<uint64_t>(linears[p].rows);
      const uint64_t elements = rows * static_cast<uint64_t>(linears[p].cols);
      f.layer_bytes[static_cast<size_t>(l)] -= elements * es - elements - 4 * rows;
    }
  }
  f.final_norm_bytes = static_cast<uint64_t>(c.hidden_size) * es;
  f.tied_embeddings = c.tie_word_embeddings;
  f.lm_head_bytes = c.tie_word_embeddings ? 0 : f.embedding_bytes;
  f.kv_bytes_per_token_per_layer =
      kv_bytes_per_token_per_layer(shard.kv_heads, c.head_dim, kv_dtype.value_or(dtype));
  return f;
}

ActivationCost DecoderModel::activation_cost(const ModelConfig& c, DType dtype, int32_t ranks,
                                             Quantization quantization) {
  const TensorParallelShard s = tensor_parallel_shard(c, 0, ranks);
  const int64_t qkv = (s.heads + 2 * s.kv_heads) * c.head_dim;
  // normed, proj, (sandwich); qkv; attn; gate_up; act; and last (and a rank's logit columns) --
  // as allocate_activations() sizes them; with FP8 layers normed and act once more as codes,
  // with a scale per row each.
  const int64_t per_token = (c.sandwich_norms ? 3 : 2) * c.hidden_size + qkv +
                            s.heads * c.head_dim + 3 * s.intermediate;
  const uint64_t fp8_per_token =
      quantization == Quantization::kFp8
          ? static_cast<uint64_t>(c.hidden_size + s.intermediate) + 2 * sizeof(float)
          : 0;
  const uint64_t rank_logits = ranks > 1 ? static_cast<uint64_t>(s.vocab_rows) * sizeof(float) : 0;
  return ActivationCost{
      .per_token = static_cast<uint64_t>(per_token) * element_size(dtype) + fp8_per_token,
      .per_logit_row = static_cast<uint64_t>(c.hidden_size) * element_size(dtype) + rank_logits};
}

AttentionShape DecoderModel::attention_shape() const {
  const TensorParallelShard& s = shards_.front();
  return AttentionShape{static_cast<int32_t>(s.heads), static_cast<int32_t>(s.kv_heads),
                        static_cast<int32_t>(config_.head_dim), config_.rope_style};
}

KvCacheShape DecoderModel::kv_cache_shape(int32_t num_blocks, int32_t block_size) const {
  return KvCacheShape{static_cast<int32_t>(config_.num_layers), num_blocks, block_size,
                      static_cast<int32_t>(shards_.front().kv_heads),
                      static_cast<int32_t>(config_.head_dim)};
}

AttentionSpec DecoderModel::attention_spec(int32_t layer) const {
  return AttentionSpec{.scale = attention_scale_,
                       .softcap = config_.attn_logit_softcap,
                       .window = config_.is_sliding(layer) ? static_cast<int32_t>(config_.sliding_window) : 0};
}

absl::Status DecoderModel::load_weights(const WeightSource& weights,
                                        const std::vector<LayerSegment>& segments,
                                        Quantization quantization, const QuantizationKeep& keep) {
  const int32_t ranks = segments.front().num_ranks();
  for (int32_t r = 0; r < ranks; ++r) shards_.push_back(tensor_parallel_shard(config_, r, ranks));
  ranks_.resize(static_cast<size_t>(ranks));
  stages_.assign(segments.size(), std::vector<Stage>(static_cast<size_t>(ranks)));
  WeightLoader loader(weights, arena_);
  for (int32_t r = 0; r < ranks; ++r) {
    TESSERA_RETURN_IF_ERROR(load_rank(loader, segments, r, quantization, keep));
  }
  weight_bytes_ += loader.bytes_loaded();
  return absl::OkStatus();
}

absl::Status DecoderModel::load_rank(WeightLoader& loader, const std::vector<LayerSegment>& segments,
                                     int32_t rank, Quantization quantization,
                                     const QuantizationKeep& keep) {
  const ModelConfig& c = config_;
  const TensorParallelShard& shard = shards_[rank];
  const int64_t h = c.hidden_size;
  Backend& first = segments.front().rank_backend(rank);
  Backend& last = segments.back().rank_backend(rank);
  RankWeights& w = ranks_[rank];
  // The rank's rows of the vocabulary (all of them on one rank); the last rank's padding rows
  // past the vocabulary are zeros.
  auto vocab_rows = [&](Backend& b, std::string name) -> absl::StatusOr<Tensor> {
    if (shard.size == 1) return loader.load(b, {name}, {c.vocab_size, h});
    return loader.load_row_slice(b, std::move(name), shard.first_vocab, shard.vocab_real,
                                 shard.vocab_rows, h);
  };
  TESSERA_ASSIGN_OR_RETURN(w.embed, vocab_rows(first, "model.embed_tokens.weight"));
  TESSERA_ASSIGN_OR_RETURN(w.final_norm, loader.load(last, {"model.norm.weight"}, {h}));
  if (c.tie_word_embeddings && &first == &last) {
    w.lm_head = w.embed;
  } else {
    // Untied, or tied with the head on another device than the embeddings: that device holds
    // its own copy of the (shared) matrix.
    TESSERA_ASSIGN_OR_RETURN(w.lm_head, vocab_rows(last, c.tie_word_embeddings ? "model.embed_tokens.weight"
                                                                                : "lm_head.weight"));
  }
  w.layers.resize(c.num_layers);
  for (size_t s = 0; s < segments.size(); ++s) {
    const LayerSegment& seg = segments[s];
    Backend& b = seg.rank_backend(rank);
    for (int64_t i = seg.first_layer; i < seg.end_layer(); ++i) {
      const auto parts = decoder_layer_linear_parts(c, i, shard);
      std::array<bool, kLinearProjections> kept{};
      bool all_kept = true;
      for (int p = 0; p < kLinearProjections; ++p) {
        kept[p] = quantization == Quantization::kNone ||
                  keep.keeps(i, static_cast<LinearProjection>(p));
        // What an FP8 checkpoint stores in higher precision (its ignore list) stays so.
        if (!kept[p] && c.quantization.quantized()) {
          TESSERA_ASSIGN_OR_RETURN(const bool fp8, loader.stored_in_fp8(parts[p].parts));
          kept[p] = !fp8;
        }
        all_kept = all_kept && kept[p];
      }
      if (all_kept) {
        TESSERA_ASSIGN_OR_RETURN(w.layers[i], load_decoder_layer(loader, b, c, i, shard));
        continue;
      }
      // Linear weights an FP8 checkpoint stores with per-tensor or per-row scales keep their codes
      // (no second rounding); the rest of the layer is loaded in the compute dtype in memory of
      // its own, then kept, quantized where not kept in it.
      std::array<Tensor, kLinearProjections> stored;
      std::array<bool, kLinearProjections> skip{};
      for (int p = 0; p < kLinearProjections && c.quantization.quantized(); ++p) {
        if (kept[p]) continue;
        TESSERA_ASSIGN_OR_RETURN(
            std::optional<Tensor> codes,
            loader.load_fp8_codes(b, parts[p].parts, parts[p].shape.rows, parts[p].shape.cols));
        if (!codes.has_value()) continue;
        stored[p] = *codes;
        skip[p] = true;
      }
      TensorArena staging;
      WeightLoader staged_loader(loader.weights(), staging);
      TESSERA_ASSIGN_OR_RETURN(const DecoderLayer staged,
                               load_decoder_layer(staged_loader, b, c, i, shard, skip));
      TESSERA_ASSIGN_OR_RETURN(w.layers[i],
                               keep_layer_fp8(staged, b, arena_, kept, stored, &weight_bytes_));
    }
    Stage& stage = stages_[s][rank];
    const std::vector<float> inv_freq = rope_inv_freq(c);
    TESSERA_ASSIGN_OR_RETURN(stage.inv_freq,
                             arena_.allocate(b, DType::kF32, {static_cast<int64_t>(inv_freq.size())}));
    b.upload_f32(inv_freq, stage.inv_freq);
    stage.inv_freq_sliding = stage.inv_freq;
    if (c.rope_local_theta > 0.0f && c.sliding_window > 0) {
      const std::vector<float> local = rope_inv_freq(c, /*sliding_layer=*/true);
      TESSERA_ASSIGN_OR_RETURN(stage.inv_freq_sliding,
                               arena_.allocate(b, DType::kF32, {static_cast<int64_t>(local.size())}));
      b.upload_f32(local, stage.inv_freq_sliding);
    }
  }
  return absl::OkStatus();
}

bool DecoderModel::has_fp8_layers(const LayerSegment& segment, int32_t rank) const {
  for (int32_t i = segment.first_layer; i < segment.end_layer(); ++i) {
    const DecoderLayer& l = ranks_[rank].layers[i];
    for (const Tensor* w : {&l.qkv, &l.o, &l.gate_up, &l.down}) {
      if (w->dtype == DType::kF8_E4M3) return true;
    }
  }
  return false;
}

absl::StatusOr<Tensor> DecoderModel::fp8_activation(Backend& backend, int64_t rows,
                                                    int64_t width) {
  TESSERA_ASSIGN_OR_RETURN(Tensor codes,
                           arena_.allocate(backend, DType::kF8_E4M3, {rows, width}));
  TESSERA_ASSIGN_OR_RETURN(const Tensor scales, arena_.allocate(backend, DType::kF32, {rows}));
  codes.scale = scales.as<float>();
  return codes;
}

absl::Status DecoderModel::allocate_activations(int32_t stage, const LayerSegment& segment,
                                                int64_t rows, int64_t logit_rows, bool last) {
  const ModelConfig& c = config_;
  for (int32_t r = 0; r < segment.num_ranks(); ++r) {
    const TensorParallelShard& s = shards_[r];
    Backend& b = segment.rank_backend(r);
    Activations& act = stages_[stage][r].act;
    const DType dt = b.compute_dtype();
    TESSERA_ASSIGN_OR_RETURN(act.normed, arena_.allocate(b, dt, {rows, c.hidden_size}));
    TESSERA_ASSIGN_OR_RETURN(act.qkv, arena_.allocate(b, dt, {rows, attention_shape().qkv_width()}));
    TESSERA_ASSIGN_OR_RETURN(act.attn, arena_.allocate(b, dt, {rows, s.heads * c.head_dim}));
    TESSERA_ASSIGN_OR_RETURN(act.proj, arena_.allocate(b, dt, {rows, c.hidden_size}));
    TESSERA_ASSIGN_OR_RETURN(act.gate_up, arena_.allocate(b, dt, {rows, 2 * s.intermediate}));
    TESSERA_ASSIGN_OR_RETURN(act.act, arena_.allocate(b, dt, {rows, s.intermediate}));
    if (c.sandwich_norms) {
      TESSERA_ASSIGN_OR_RETURN(act.sandwich, arena_.allocate(b, dt, {rows, c.hidden_size}));
    }
    if (has_fp8_layers(segment, r)) {
      TESSERA_ASSIGN_OR_RETURN(act.normed_fp8, fp8_activation(b, rows, c.hidden_size));
      TESSERA_ASSIGN_OR_RETURN(act.act_fp8, fp8_activation(b, rows, s.intermediate));
    }
    if (!last) continue;
    TESSERA_ASSIGN_OR_RETURN(act.last, arena_.allocate(b, dt, {logit_rows, c.hidden_size}));
    if (segment.num_ranks() > 1) {
      TESSERA_ASSIGN_OR_RETURN(act.logits, arena_.allocate(b, DType::kF32, {logit_rows, s.vocab_rows}));
    }
  }
  return absl::OkStatus();
}

void DecoderModel::run_stage(const StagePass& p) {
  Backend& b = p.segment.rank_backend(p.rank);
  Communicator* comm = p.segment.comm(p.rank);
  const RankWeights& w = ranks_[p.rank];
  StageRun run(*this, p);
  if (p.first_stage) {
    b.embedding(w.embed, shards_[p.rank].first_vocab, config_.embedding_scale, run.x_);
    if (comm != nullptr) comm->all_reduce_sum(run.x_);  // each token's row from the rank holding it
  }
  for (int32_t i = p.segment.first_layer; i < p.segment.end_layer(); ++i) {
    run_layer(run, w.layers[i], i);
  }
  if (!p.last_stage) {
    // Complete the residual stream before it travels: the backends' only residual add is the
    // fused one, whose normalized output is not needed here.
    run.norm_input(w.layers[p.segment.end_layer() - 1].input_layernorm, /*reader=*/Tensor{});
    return;
  }
  if (p.logits.count == 0) return;
  run.norm_input(w.final_norm, /*reader=*/Tensor{});  // 16-bit: gathered for lm_head
  const Activations& act = stages_[p.stage][p.rank].act;
  b.gather_logit_rows(run.normed_, p.logits.of(act.last));
  // One rank writes the logits; several write their columns, gathered onto rank 0's.
  const Tensor& out = comm == nullptr ? p.logit_out : act.logits;
  b.linear(p.logits.gemm_of(act.last), w.lm_head, p.logits.gemm_of(out));
  if (config_.final_logit_softcap > 0.0f) b.soft_cap(p.logits.of(out), config_.final_logit_softcap);
  if (comm != nullptr) {
    comm->gather_columns(p.logits.of(act.logits),
                         p.logit_out.data != nullptr ? p.logits.of(p.logit_out) : Tensor{});
  }
}

}  // namespace tessera
