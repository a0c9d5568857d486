// Runs a step of any model family: the family (StageModel) supplies the math of one stage's
// layers; the runner owns how a step runs.
//
//  - Padding: with GEMM buckets set, every GEMM runs on its token count padded to a bucket
//    (runtime/tuning/token_buckets.h), so that a tuned shape is the one that runs.
//  - Decode graphs: decode-only steps of up to the largest decode bucket are padded to their
//    bucket and replayed as graphs recorded per (bucket, context class) (graph_step.h).
//  - Pipeline stages: split over devices (LayerSegments), each stage has its own activations;
//    between stages only the residual stream travels, completed by the stage before it.
//  - Tensor parallelism: every stage is a group of ranks (LayerSegment::ranks), each a lane of
//    its own through the stages: its share of every stage on its own backend, its own residual
//    stream, driven from its own host thread (RankThreads), the family's collectives joining the
//    lanes. Logits gather onto rank 0 of the last stage, which samples.
//  - Micro-batches: over several stages a large step's tokens are split so that the stages work
//    concurrently on different parts (on devices that queue work asynchronously).
//  - Sampling: forward() hands back fp32 logits; forward_sampled() samples on the last stage's
//    backend and hands back only the tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend/layer_segment.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/runner/forward_model.h"
#include "runtime/runner/rank_threads.h"
#include "runtime/runner/stage_model.h"
#include "runtime/runner/step_batch_split.h"
#include "runtime/runner/tensor_arena.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera {

// When decode steps run as recorded graphs (runtime/runner/graph_step.h, Backend::run_graph).
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

// Rows the activations hold: the limits plus the most that GEMM or graph padding adds to a part.
struct StepCapacity {
  int64_t tokens = 0;
  int64_t logit_rows = 0;
};

// What a family's activations cost per row (StageModel::allocate_activations).
struct ActivationCost {
  uint64_t per_token = 0;      // bytes per token row, on every stage
  uint64_t per_logit_row = 0;  // bytes per logit row, on the last stage
};

// The activation bytes a model's steps hold, for the placement planner.
struct ActivationBytes {
  uint64_t stage = 0;  // on every stage
  uint64_t head = 0;   // on the last stage (lm_head's device) besides
};

class StepRunner final : public ForwardModel {
 public:
  // Runs `model` over `segments` (validated against its layers): allocates the residual stream
  // of every stage, the logits and sampled tokens on the last, and has the model allocate its
  // activations for the same rows.
  static absl::StatusOr<std::unique_ptr<StepRunner>> create(std::unique_ptr<StageModel> model,
                                                            std::vector<LayerSegment> segments,
                                                            ForwardLimits limits,
                                                            ExecutionOptions execution);

  static StepCapacity capacity(const ForwardLimits& limits, const ExecutionOptions& execution);
  // What create() will allocate for a family of `family` cost, hidden size and vocabulary: on
  // every stage the residual stream and the family's token rows; on the last also the family's
  // logit rows, the fp32 logits and the sampled tokens.
  static ActivationBytes activation_bytes(const ActivationCost& family, int64_t hidden_size,
                                          int64_t vocab_size, const ForwardLimits& limits,
                                          const ExecutionOptions& execution, DType dtype);

  StageModel& model() { return *model_; }
  const std::vector<LayerSegment>& segments() const { return segments_; }
  // The most sequences a decode step may have to run as graphs; 0 when steps run without them.
  int64_t largest_graph_bucket() const { return largest_graph_bucket_; }

  int64_t vocab_size() const override { return model_->vocab_size(); }
  const ForwardLimits& limits() const override { return limits_; }
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
  double last_device_wait_seconds() const override { return device_wait_seconds_; }
  // On device backends: the caller's work runs once a decode graph step is queued, while the
  // devices compute it; before a step queued kernel by kernel (see run_step).
  bool overlaps_host_work() const override { return queues_device_work_; }

 private:
  // One pipeline stage's device state the runner keeps.
  struct Stage {
    LayerSegment segment;
    std::vector<Tensor> residual;  // [rank]: [capacity tokens, hidden] on the rank's backend
  };
  // What a step hands back: the logits (forward) or the tokens sampled by `rows` on the last
  // stage's backend (forward_sampled); exactly one of `logits` and `tokens` is non-empty.
  struct StepOutput {
    std::span<float> logits;            // [n_logits, vocab]
    std::span<const SamplingRow> rows;  // [n_logits]
    std::span<int32_t> tokens;          // [n_logits]
  };

  StepRunner(std::unique_ptr<StageModel> model, ForwardLimits limits, ExecutionOptions execution);
  // The buckets steps are padded to: gemm_buckets, else the defaults when graphs may run.
  static std::optional<TokenBuckets> padding_buckets(const ExecutionOptions& execution);
  absl::Status allocate(const StepCapacity& cap);
  absl::Status run_step(const StepBatch& batch, const KvCache& cache, const StepOutput& output);
  // The row count the GEMMs run with for `part`: its tokens, padded to the buckets.
  int64_t gemm_rows(const StepBatch& part) const;
  // The row count lm_head runs with for `n_logits` rows.
  int64_t logit_gemm_rows(int64_t n_logits) const;
  // Whether `batch` runs as graphs (decode only, within the largest graph bucket).
  bool runs_as_graph(const StepBatch& batch) const;
  // Parts `batch` runs in: 1 on one stage, else up to micro_batches of at least
  // min_micro_batch_tokens each.
  int32_t micro_batches(const StepBatch& batch) const;
  // Queues the padded step through each stage's recorded graph.
  absl::Status run_graph_step(const StepBatch& batch, const KvCache& cache);
  // Stage `s` > 0's rank `rank` receives the residual stream rows [first_token, first_token + n)
  // from the same rank of s - 1.
  void receive_residual(size_t s, int32_t rank, int64_t first_token, int64_t n);
  // Queues stage `s`'s share of one pass on rank `rank`: `part`'s tokens at `first_token` of the
  // activations, its logit rows at `first_logit_row`, GEMMs over `gemm_rows` rows.
  void run_stage(size_t s, int32_t rank, const StepBatch& part, int64_t gemm_rows,
                 int64_t first_token, int64_t first_logit_row, const KvCache& cache);
  // Waits for every rank of every stage; the first error of a backend or a collective.
  absl::Status synchronize_all();

  std::unique_ptr<StageModel> model_;
  ForwardLimits limits_;
  ExecutionOptions execution_;
  std::vector<LayerSegment> segments_;
  std::vector<Stage> stages_;
  TensorArena arena_;                  // owns the residual streams, logits_ and sampled_
  Tensor logits_;                      // [capacity logit rows, vocab] fp32, last stage's rank 0
  Tensor sampled_;                     // [capacity logit rows] int32, last stage's rank 0
  std::unique_ptr<RankThreads> lanes_;  // one host thread per tensor-parallel rank
  std::vector<absl::Status> lane_status_;  // each lane's graph step (reused: no allocation a step)
  std::vector<StepBatchPart> parts_;   // the current step's micro-batches (reused)
  uint32_t id_;                        // its graphs' keys: unique per runner and KV cache
  uint64_t graph_cache_ = 0;  // KvCache::id() of the cache the recordings under id_ write (0: none)
  TokenBuckets graph_buckets_;         // what graph steps are padded to
  int64_t largest_graph_bucket_ = 0;   // 0: decode steps run without graphs
  StepBatch graph_batch_;              // the current graph step, padded (reused)
  int64_t graph_steps_ = 0;            // steps run_graph_step completed
  int64_t micro_batched_steps_ = 0;    // steps run as several parts
  double device_wait_seconds_ = 0;     // the last step's time in synchronize()
  bool queues_device_work_ = false;    // the backends are devices (not the host's CPU backend)
};

}  // namespace tessera
