// The Llama family (SmolLM2, TinyLlama, Llama 2/3.x): embedding, then per layer RMSNorm -> fused
// QKV -> RoPE + cache write -> paged attention -> O projection -> residual RMSNorm -> fused
// gate/up -> SiLU-and-mul -> down, then the final norm and lm_head. The StepRunner
// (runtime/runner/) runs it: this file holds the weights and the math of one stage's layers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend/layer_segment.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/placement/placement_planner.h"
#include "runtime/runner/stage_model.h"
#include "runtime/runner/step_runner.h"
#include "runtime/runner/tensor_arena.h"

namespace tessera {

class LlamaModel final : public StageModel {
 public:
  // Loads and validates every weight onto the backend of the segment that holds it (fusing
  // q/k/v and gate/up): the embeddings on the first, the final norm and lm_head on the last (a
  // copy of the embeddings there when they are tied and the devices differ).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> load(const WeightSource& weights,
                                                          std::vector<LayerSegment> segments);

  // What load() and allocate_activations() place, in `dtype`, for the placement planner: weight
  // bytes per module; activation bytes per token row (every stage) and per logit row (the last).
  static ModelFootprint footprint(const ModelConfig& config, DType dtype);
  static ActivationCost activation_cost(const ModelConfig& config, DType dtype);

  const ModelConfig& config() const { return config_; }
  AttentionShape attention_shape() const;
  KvCacheShape kv_cache_shape(int32_t num_blocks, int32_t block_size) const;
  size_t weight_bytes() const { return weight_bytes_; }

  int32_t num_layers() const override { return static_cast<int32_t>(config_.num_layers); }
  int64_t hidden_size() const override { return config_.hidden_size; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  absl::Status allocate_activations(int32_t stage, const LayerSegment& segment, int64_t rows,
                                    int64_t logit_rows, bool last) override;
  void run_stage(const StagePass& pass) override;

 private:
  struct Layer {
    Tensor input_norm;  // [hidden]
    Tensor qkv;         // [(n_heads + 2 * n_kv_heads) * head_dim, hidden]
    Tensor o;           // [hidden, n_heads * head_dim]
    Tensor post_norm;   // [hidden]
    Tensor gate_up;     // [2 * intermediate, hidden]
    Tensor down;        // [hidden, intermediate]
  };
  // One stage's scratch (the residual stream is the runner's).
  struct Activations {
    Tensor normed;   // [rows, hidden]
    Tensor qkv;      // [rows, qkv_width]
    Tensor attn;     // [rows, n_heads * head_dim]
    Tensor proj;     // [rows, hidden]   o_proj and down_proj outputs
    Tensor gate_up;  // [rows, 2 * intermediate]
    Tensor act;      // [rows, intermediate]
    Tensor last;     // [logit rows, hidden] lm_head's input, on the last stage
  };
  struct Stage {
    Tensor inv_freq;  // [head_dim / 2] fp32
    Activations act;
  };

  explicit LlamaModel(ModelConfig config) : config_(std::move(config)) {}
  absl::Status load_weights(const WeightSource& weights, const std::vector<LayerSegment>& segments);

  ModelConfig config_;
  TensorArena arena_;  // owns every tensor below
  size_t weight_bytes_ = 0;
  Tensor embed_;       // [vocab, hidden], on the first stage
  Tensor final_norm_;  // [hidden], on the last stage
  Tensor lm_head_;     // [vocab, hidden], on the last stage; the embedding (or its copy) when tied
  std::vector<Layer> layers_;
  std::vector<Stage> stages_;
};

}  // namespace tessera
