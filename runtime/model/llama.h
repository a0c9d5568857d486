// The Llama-family forward pass, written once against the Backend seam: embedding, then per
// layer RMSNorm -> fused QKV -> RoPE + cache write -> paged attention -> O projection ->
// residual RMSNorm -> fused gate/up -> SiLU-and-mul -> down, then the final norm and lm_head.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/kv_cache.h"
#include "runtime/model/forward_model.h"
#include "runtime/model/weight_source.h"

namespace tessera {

class LlamaModel final : public ForwardModel {
 public:
  // Loads and validates every weight (fusing q/k/v and gate/up), and sizes the activations.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> load(const WeightSource& weights,
                                                          Backend& backend, ForwardLimits limits);

  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  const ForwardLimits& limits() const override { return limits_; }
  AttentionShape attention_shape() const;
  KvCacheShape kv_cache_shape(int32_t num_blocks, int32_t block_size) const;
  size_t weight_bytes() const { return weight_bytes_; }

  absl::Status forward(const StepBatch& batch, const KvCache& cache,
                       std::span<float> logits) override;
  // Every backend has a sample op: lm_head's fp32 logits stay on the device, tokens come back.
  bool can_sample_on_device() const override { return true; }
  absl::Status forward_sampled(const StepBatch& batch, const KvCache& cache,
                               std::span<const SamplingRow> rows,
                               std::span<int32_t> tokens) override;

 private:
  struct Layer {
    Tensor input_norm;  // [hidden]
    Tensor qkv;         // [(n_heads + 2 * n_kv_heads) * head_dim, hidden]
    Tensor o;           // [hidden, n_heads * head_dim]
    Tensor post_norm;   // [hidden]
    Tensor gate_up;     // [2 * intermediate, hidden]
    Tensor down;        // [hidden, intermediate]
  };
  struct Activations {
    Tensor residual;  // [max_tokens, hidden]
    Tensor normed;    // [max_tokens, hidden]
    Tensor qkv;       // [max_tokens, qkv_width]
    Tensor attn;      // [max_tokens, n_heads * head_dim]
    Tensor proj;      // [max_tokens, hidden]   o_proj and down_proj outputs
    Tensor gate_up;   // [max_tokens, 2 * intermediate]
    Tensor act;       // [max_tokens, intermediate]
    Tensor last;      // [max_logit_rows, hidden]
    Tensor logits;    // [max_logit_rows, vocab] fp32
  };

  LlamaModel(Backend& backend, ModelConfig config, ForwardLimits limits)
      : backend_(backend), config_(std::move(config)), limits_(limits) {}
  absl::StatusOr<Tensor> allocate(DType dtype, std::initializer_list<int64_t> dims);
  absl::StatusOr<Tensor> load_tensor(const WeightSource& weights,
                                     std::initializer_list<std::string_view> names,
                                     std::initializer_list<int64_t> dims);
  absl::Status load_weights(const WeightSource& weights);
  absl::Status allocate_activations();
  // What a step hands back: the logits (forward) or the tokens sampled by `rows` on the
  // backend (forward_sampled); exactly one of `logits` and `tokens` is non-empty.
  struct StepOutput {
    std::span<float> logits;             // [n_logits, vocab]
    std::span<const SamplingRow> rows;   // [n_logits]
    std::span<int32_t> tokens;           // [n_logits]
  };
  absl::Status run_step(const StepBatch& batch, const KvCache& cache, const StepOutput& out);

  Backend& backend_;
  ModelConfig config_;
  ForwardLimits limits_;
  std::vector<DeviceBuffer> buffers_;  // owns every tensor below
  size_t weight_bytes_ = 0;
  Tensor embed_;     // [vocab, hidden]
  Tensor final_norm_;  // [hidden]
  Tensor lm_head_;   // [vocab, hidden]; the embedding when tied
  Tensor inv_freq_;  // [head_dim / 2] fp32
  std::vector<Layer> layers_;
  Activations act_;
  Tensor sampled_;   // [max_logit_rows] int32: the backend's sample op writes the tokens here
};

}  // namespace tessera
