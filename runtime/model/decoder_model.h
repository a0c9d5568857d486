// What every family shares: the weights of a decoder stack placed over the runner's stages, its
// activations, and the layers a family's forward is written with (StageRun). A family supplies
// only run_layer(), the math of one decoder layer, top to bottom (llama.cc, gemma.cc); the
// StepRunner (runtime/runner/) runs the stages.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend/layer_segment.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/tensor_parallel.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/placement/placement_planner.h"
#include "runtime/runner/stage_model.h"
#include "runtime/runner/step_runner.h"
#include "runtime/runner/tensor_arena.h"

namespace tessera {

class DecoderModel;

// One stage pass as a family's layer sees it: the residual stream `x` of the pass's rows, the
// shared layers over them, and what the previous layer left to add to x (added inside the next
// norm, so that the residual add costs no pass of its own).
//
// Under tensor parallelism the o and down projections leave each rank's share of proj; it is
// summed over the ranks where it is first used -- inside the residual add and norm that follow
// (add_norm_proj, or the next norm_input after defer_add_proj), as one op where the communicator
// fuses them, or by proj() for a family that reads it whole. A family's layer must use proj
// through one of those three after every attention() and mlp(): a share left unsummed is a
// wrong result on every rank, not an error.
class StageRun {
 public:
  // The norms below that write `normed` are told the weight that reads it next (qkv or
  // gate_up; an empty tensor for none): where that GEMM reads FP8 activations, normed is written
  // as FP8 codes.
  //
  // normed = norm(x + pending) (just norm(x) at the stage's first layer: x arrives complete).
  void norm_input(const Tensor& w, const Tensor& reader);
  // proj = o(attention(rope(qkv(normed)))) over layer i's cache, with the layer's window.
  void attention(const DecoderLayer& l, int32_t i);
  // x += y; normed = norm(x).
  void add_norm(const Tensor& y, const Tensor& w, const Tensor& reader);
  // x += proj; normed = norm(x).
  void add_norm_proj(const Tensor& w, const Tensor& reader);
  // out = norm(y) (the sandwich norms of Gemma).
  void norm(const Tensor& y, const Tensor& w, const Tensor& out);
  // proj = down(act(gate_up(normed))).
  void mlp(const DecoderLayer& l);
  // y joins x at the next norm_input (or the stage's end).
  void defer_add(const Tensor& y) {
    pending_ = y;
    pending_is_share_ = false;
  }
  // proj joins x at the next norm_input (or the stage's end).
  void defer_add_proj();

  // This pass's rows of the activations; proj summed over the ranks.
  const Tensor& proj();
  const Tensor& sandwich() const { return sandwich_; }

 private:
  friend class DecoderModel;
  StageRun(const DecoderModel& model, const StagePass& pass);

  const DecoderModel& model_;
  const StagePass& pass_;
  Backend& b_;             // the pass's rank's
  Communicator* comm_;     // its tensor-parallel group's; null for one rank
  Tensor x_, normed_, qkv_, attn_, proj_, gate_up_, act_, sandwich_;  // [rows, ...] of this pass
  Tensor normed_fp8_, act_fp8_;  // the same as FP8 codes (FP8 layers only)
  bool normed_is_fp8_ = false;   // the last norm wrote normed_fp8_, not normed_
  Tensor pending_;  // empty: nothing to add
  bool proj_is_share_ = false;     // proj_ holds this rank's share, not yet summed
  bool pending_is_share_ = false;  // pending_ likewise

  // x += y; normed = norm(x), with y this rank's share: summed over the ranks in the same op
  // where the communicator fuses them (16-bit normed only).
  void add_norm_of_share(const Tensor& y, const Tensor& w);
  // Where the next norm writes for `reader`: normed_fp8_ if reader's GEMM over this pass's rows
  // reads FP8 activations, else normed_ (and normed_is_fp8_ says which).
  const Tensor& normed_for(const Tensor& reader);
  // The tensor the GEMMs read normed from (this pass's GEMM rows).
  Tensor normed_gemm_rows() const;
};

class DecoderModel : public StageModel {
 public:
  // Loads the family `weights.config().architecture` names, every weight onto the backend of the
  // segment that holds it: the embeddings on the first, the final norm and lm_head on the last
  // (a copy of the embeddings there when they are tied and the devices differ). With several
  // tensor-parallel ranks each rank's backend takes its shard (tensor_parallel.h). An
  // architecture with no forward here is refused with the list of those that have one; a rank
  // count that does not split the model, with the numbers. With `quantization` kFp8 the decoder
  // layers' linear weights are kept in FP8 (a scale per output feature; every backend must
  // support it: Backend::supports) but those `keep` names (a layer it names past the model's is
  // an error), loaded a layer at a time in the compute dtype and quantized, so that only one
  // layer's full-precision copy is ever resident beside the kept weights.
  static absl::StatusOr<std::unique_ptr<DecoderModel>> load(
      const WeightSource& weights, std::vector<LayerSegment> segments,
      Quantization quantization = Quantization::kNone, const QuantizationKeep& keep = {});

  // What load() and allocate_activations() place on each of `ranks` tensor-parallel ranks, in
  // `dtype` (the linear weights in FP8 with kFp8, but those `keep` names), and a KV cache of
  // `kv_dtype` (unset: `dtype`), for the placement planner.
  static ModelFootprint footprint(const ModelConfig& config, DType dtype, int32_t ranks = 1,
                                  Quantization quantization = Quantization::kNone,
                                  const QuantizationKeep& keep = {},
                                  std::optional<DType> kv_dtype = {});
  static ActivationCost activation_cost(const ModelConfig& config, DType dtype, int32_t ranks = 1,
                                        Quantization quantization = Quantization::kNone);

  const ModelConfig& config() const { return config_; }
  int32_t num_ranks() const { return static_cast<int32_t>(shards_.size()); }
  // One rank's attention heads and KV cache (all ranks alike).
  AttentionShape attention_shape() const;
  KvCacheShape kv_cache_shape(int32_t num_blocks, int32_t block_size) const;
  size_t weight_bytes() const { return weight_bytes_; }

  int32_t num_layers() const override { return static_cast<int32_t>(config_.num_layers); }
  int64_t hidden_size() const override { return config_.hidden_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  absl::Status allocate_activations(int32_t stage, const LayerSegment& segment, int64_t rows,
                                    int64_t logit_rows, bool last) override;
  void run_stage(const StagePass& pass) final;

 protected:
  explicit DecoderModel(ModelConfig config);
  // The family's math of decoder layer i.
  virtual void run_layer(StageRun& run, const DecoderLayer& l, int32_t i) const = 0;

 private:
  friend class StageRun;
  // One stage's scratch (the residual stream is the runner's).
  struct Activations {
    Tensor normed;    // [rows, hidden]
    Tensor qkv;       // [rows, qkv_width]
    Tensor attn;      // [rows, n_heads * head_dim]
    Tensor proj;      // [rows, hidden]   o_proj and down_proj outputs
    Tensor gate_up;   // [rows, 2 * intermediate]
    Tensor act;       // [rows, intermediate]
    Tensor sandwich;  // [rows, hidden]   sandwich-normed outputs (sandwich_norms only)
    // FP8 layers only: normed and act as FP8 codes with a scale per row, written by the norm or
    // activation where the next GEMM reads its activations so (Backend::fp8_activations).
    Tensor normed_fp8;  // [rows, hidden] kF8_E4M3
    Tensor act_fp8;     // [rows, intermediate] kF8_E4M3
    Tensor last;      // [logit rows, hidden] lm_head's input, on the last stage
    Tensor logits;    // [logit rows, vocab rows] fp32: the rank's columns (several ranks only)
  };
  // One rank's share of one stage.
  struct Stage {
    Tensor inv_freq;          // [head_dim / 2] fp32, full-attention layers
    Tensor inv_freq_sliding;  // [head_dim / 2] fp32, sliding layers (== inv_freq unless Gemma 3)
    Activations act;
  };
  // One rank's weights (the whole model's on one rank). Shapes as on one rank, the vocabulary
  // dimension being the rank's vocab_rows.
  struct RankWeights {
    Tensor embed;       // [vocab, hidden], on the first stage
    Tensor final_norm;  // [hidden], on the last stage
    Tensor lm_head;     // [vocab, hidden], on the last stage; the embedding (or its copy) when tied
    std::vector<DecoderLayer> layers;
  };

  absl::Status load_weights(const WeightSource& weights, const std::vector<LayerSegment>& segments,
                            Quantization quantization, const QuantizationKeep& keep);
  absl::Status load_rank(WeightLoader& loader, const std::vector<LayerSegment>& segments,
                         int32_t rank, Quantization quantization, const QuantizationKeep& keep);
  AttentionSpec attention_spec(int32_t layer) const;
  // Whether any decoder layer `segment` holds on `rank` has FP8 weights.
  bool has_fp8_layers(const LayerSegment& segment, int32_t rank) const;
  // An FP8 activation of rows x width on `backend`: codes and a scale per row (Tensor::scale).
  absl::StatusOr<Tensor> fp8_activation(Backend& backend, int64_t rows, int64_t width);

  ModelConfig config_;
  float attention_scale_;  // head_dim^-1/2 (or query_pre_attn_scalar^-1/2), times yarn's factor^2
  TensorArena arena_;      // owns every tensor below
  size_t weight_bytes_ = 0;
  std::vector<TensorParallelShard> shards_;  // [rank]
  std::vector<RankWeights> ranks_;           // [rank]
  std::vector<std::vector<Stage>> stages_;   // [stage][rank]
};

}  // namespace tessera
