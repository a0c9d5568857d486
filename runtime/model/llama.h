// The Llama-family forward pass, written once against the Backend seam: embedding, then per
// layer RMSNorm -> fused QKV -> RoPE + cache write -> paged attention -> O projection ->
// residual RMSNorm -> fused gate/up -> SiLU-and-mul -> down, then the final norm and lm_head.
//
// Split over devices, the layers run as a pipeline of stages (runtime/layer_segment.h): each
// stage has its own activations; between stages only the residual stream travels (completed
// with the stage's last MLP output first). With micro-batches a large step's tokens are split so
// that the stages work concurrently on different parts (on devices that queue work
// asynchronously; the CPU backend runs them one after the other).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/kv_cache.h"
#include "runtime/layer_segment.h"
#include "runtime/model/forward_model.h"
#include "runtime/model/weight_source.h"
#include "runtime/placement/placement_planner.h"
#include "runtime/step_batch_split.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera {

// When decode steps run as recorded graphs (runtime/graph_step.h, Backend::run_graph).
enum class DecodeGraphs {
  kOff,
  kAuto,    // where every stage's backend records graphs (the GPU)
  kAlways,  // on every backend: the CPU runs the same padded steps directly (how tests cover them)
};

struct ExecutionOptions {
  // Parts a step is split into when the model spans several stages (1 = no split), each of at
  // least min_micro_batch_tokens tokens: a part only pays when it keeps the GEMMs compute-bound
  // (on a memory-bound step every part reads all the weights again), so decode steps, which run
  // as graphs, are never split. A step split into parts runs without graphs.
  int32_t micro_batches = 2;
  int32_t min_micro_batch_tokens = 256;
  // Decode-only steps of at most the largest decode bucket are padded to their bucket and run as
  // graphs (the buckets of gemm_buckets when set, else TokenBuckets' defaults).
  DecodeGraphs decode_graphs = DecodeGraphs::kAuto;
  // When set, every GEMM runs on its token count padded to these buckets (token_buckets.h), so
  // that a tuned shape is the one that runs; the padding rows compute nothing anyone reads.
  std::optional<TokenBuckets> gemm_buckets;
};

class LlamaModel final : public ForwardModel {
 public:
  // Loads and validates every weight (fusing q/k/v and gate/up), and sizes the activations.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> load(const WeightSource& weights,
                                                          Backend& backend, ForwardLimits limits);
  // The same over several devices: `segments` (validated against the model) say which backend
  // holds which layers; the embeddings go to the first, the final norm and lm_head to the last
  // (a copy of the embeddings there when they are tied).
  static absl::StatusOr<std::unique_ptr<LlamaModel>> load(const WeightSource& weights,
                                                          std::vector<LayerSegment> segments,
                                                          ForwardLimits limits,
                                                          ExecutionOptions execution);

  // What load() will allocate, in `dtype`, for the placement planner: weight bytes per module,
  // the activations every stage holds, and those only the last stage holds (lm_head's input
  // rows, the fp32 logits, the sampled tokens).
  static ModelFootprint footprint(const ModelConfig& config, DType dtype);
  static uint64_t activation_bytes(const ModelConfig& config, const ForwardLimits& limits,
                                   const ExecutionOptions& execution, DType dtype);
  static uint64_t head_activation_bytes(const ModelConfig& config, const ForwardLimits& limits,
                                        const ExecutionOptions& execution, DType dtype);

  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const override { return config_.vocab_size; }
  const ForwardLimits& limits() const override { return limits_; }
  AttentionShape attention_shape() const;
  KvCacheShape kv_cache_shape(int32_t num_blocks, int32_t block_size) const;
  size_t weight_bytes() const { return weight_bytes_; }
  const std::vector<LayerSegment>& segments() const { return segments_; }
  // The most sequences a decode step may have to run as graphs; 0 when steps run without them.
  int64_t largest_graph_bucket() const { return largest_graph_bucket_; }

  absl::Status forward(const StepBatch& batch, const KvCache& cache,
                       std::span<float> logits) override;
  // Every backend has a sample op: lm_head's fp32 logits stay on the (last) device, tokens come
  // back.
  bool can_sample_on_device() const override { return true; }
  absl::Status forward_sampled(const StepBatch& batch, const KvCache& cache,
                               std::span<const SamplingRow> rows,
                               std::span<int32_t> tokens) override;
  int64_t graph_steps() const override { return graph_steps_; }
  int64_t micro_batched_steps() const override { return micro_batched_steps_; }

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

  // One pipeline stage's device state.
  struct Stage {
    LayerSegment segment;
    Tensor inv_freq;  // [head_dim / 2] fp32
    Activations act;  // `last` and `logits` only on the last stage
  };
  // Rows the activations hold: the limits plus the most that GEMM or graph padding adds to a part.
  struct Capacity {
    int64_t tokens = 0;
    int64_t logit_rows = 0;
  };

  LlamaModel(ModelConfig config, ForwardLimits limits, ExecutionOptions execution);
  static Capacity capacity(const ForwardLimits& limits, const ExecutionOptions& execution);
  // The buckets steps are padded to: gemm_buckets, else the defaults when graphs may run.
  static std::optional<TokenBuckets> padding_buckets(const ExecutionOptions& execution);
  absl::StatusOr<Tensor> allocate(Backend& backend, DType dtype, std::initializer_list<int64_t> dims);
  absl::StatusOr<Tensor> load_tensor(Backend& backend, const WeightSource& weights,
                                     std::initializer_list<std::string_view> names,
                                     std::initializer_list<int64_t> dims);
  absl::Status load_weights(const WeightSource& weights);
  absl::Status allocate_activations(Stage& stage, const Capacity& cap, bool last);
  // What a step hands back: the logits (forward) or the tokens sampled by `rows` on the last
  // stage's backend (forward_sampled); exactly one of `logits` and `tokens` is non-empty.
  struct StepOutput {
    std::span<float> logits;             // [n_logits, vocab]
    std::span<const SamplingRow> rows;   // [n_logits]
    std::span<int32_t> tokens;           // [n_logits]
  };
  absl::Status run_step(const StepBatch& batch, const KvCache& cache, const StepOutput& output);
  // The row count the layers' GEMMs run with for `part`: its tokens, padded to the buckets.
  int64_t gemm_rows(const StepBatch& part) const;
  // Whether `batch` runs as graphs (decode only, within the largest graph bucket).
  bool runs_as_graph(const StepBatch& batch) const;
  // Parts `batch` runs in: 1 on one stage, else up to micro_batches of at least
  // min_micro_batch_tokens each.
  int32_t micro_batches(const StepBatch& batch) const;
  // Queues the padded step through each stage's recorded graph.
  absl::Status run_graph_step(const StepBatch& batch, const KvCache& cache);
  // Stage `s` > 0 receives the residual stream rows [first_token, first_token + n) from s - 1.
  void receive_residual(size_t s, int64_t first_token, int64_t n);
  // Queues stage `s`'s work on one part of the step (after begin_step and the residual's hop):
  // the embedding on the first stage, its layers, and the head on the last; GEMMs over `m` rows.
  void run_stage(size_t s, const StepBatch& part, int64_t m, int64_t first_token,
                 int64_t first_logit_row, const KvCache& cache);

  ModelConfig config_;
  ForwardLimits limits_;
  ExecutionOptions execution_;
  std::vector<LayerSegment> segments_;
  std::vector<DeviceBuffer> buffers_;  // owns every tensor below
  size_t weight_bytes_ = 0;
  Tensor embed_;       // [vocab, hidden], on the first stage
  Tensor final_norm_;  // [hidden], on the last stage
  Tensor lm_head_;     // [vocab, hidden], on the last stage; the embedding (or its copy) when tied
  std::vector<Layer> layers_;
  std::vector<Stage> stages_;
  std::vector<StepBatchPart> parts_;  // the current step's micro-batches (reused)
  uint32_t id_;                        // its graphs' keys: unique per model and KV cache
  uint64_t graph_cache_ = 0;  // KvCache::id() of the cache the recordings under id_ write (0: none)
  TokenBuckets graph_buckets_;          // what graph steps are padded to
  int64_t largest_graph_bucket_ = 0;   // 0: decode steps run without graphs
  StepBatch graph_batch_;             // the current graph step, padded (reused)
  int64_t graph_steps_ = 0;           // steps run_graph_step completed
  int64_t micro_batched_steps_ = 0;   // steps run as several parts
  Tensor sampled_;  // [logit rows] int32 on the last stage: the backend's sample op writes here
};

}  // namespace tessera
