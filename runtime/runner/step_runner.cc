#include "runtime/runner/step_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/backend/sampling_math.h"
#include "runtime/runner/graph_step.h"

namespace tessera {

namespace {

// A number no other graph key owner in this process has had (graph_key keeps 16 bits of it).
uint32_t next_graph_owner() {
  static std::atomic<uint32_t> next{0};
  return next++;
}

}  // namespace

StepRunner::StepRunner(std::unique_ptr<StageModel> model, ForwardLimits limits,
                       ExecutionOptions execution)
    : model_(std::move(model)), limits_(limits), execution_(std::move(execution)),
      id_(next_graph_owner()) {}

absl::StatusOr<std::unique_ptr<StepRunner>> StepRunner::create(std::unique_ptr<StageModel> model,
                                                               std::vector<LayerSegment> segments,
                                                               ForwardLimits limits,
                                                               ExecutionOptions execution) {
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
  if (model->vocab_size() > kMaxSamplingVocab) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", model->vocab_size(),
                                                   " exceeds the sampler's limit of ",
                                                   kMaxSamplingVocab));
  }
  TESSERA_RETURN_IF_ERROR(validate_segments(segments, model->num_layers()));
  std::unique_ptr<StepRunner> runner(new StepRunner(std::move(model), limits, std::move(execution)));
  runner->segments_ = std::move(segments);
  // Device ranks' threads poll between steps (rank_threads.h): up to a slow decode step's time.
  const LayerSegment& first = runner->segments_.front();
  const bool devices = !first.rank_backend(0).uses_host_memory();
  runner->queues_device_work_ = devices;
  runner->lanes_ = std::make_unique<RankThreads>(
      first.num_ranks(), devices ? std::chrono::milliseconds(20) : std::chrono::microseconds(0));
  const StepCapacity cap = capacity(runner->limits_, runner->execution_);
  TESSERA_RETURN_IF_ERROR(runner->allocate(cap));
  // Graphs run where asked and every stage records them.
  const DecodeGraphs graphs = runner->execution_.decode_graphs;
  const bool recorded =
      std::all_of(runner->segments_.begin(), runner->segments_.end(), [](const LayerSegment& seg) {
        for (int32_t r = 0; r < seg.num_ranks(); ++r) {
          if (!seg.rank_backend(r).records_graphs()) return false;
        }
        return true;
      });
  if (graphs == DecodeGraphs::kAlways || (graphs == DecodeGraphs::kAuto && recorded)) {
    // The largest bucket whose padded step fits the activations.
    runner->graph_buckets_ = *padding_buckets(runner->execution_);
    for (int64_t b : runner->graph_buckets_.decode) {
      if (b <= cap.tokens && b <= cap.logit_rows) runner->largest_graph_bucket_ = b;
    }
  }
  return runner;
}

absl::Status StepRunner::allocate(const StepCapacity& cap) {
  for (size_t s = 0; s < segments_.size(); ++s) {
    const LayerSegment& seg = segments_[s];
    Backend& b = *seg.backend;
    const bool last = s + 1 == segments_.size();
    Stage stage{seg, {}};
    for (int32_t r = 0; r < seg.num_ranks(); ++r) {
      Backend& rb = seg.rank_backend(r);
      TESSERA_ASSIGN_OR_RETURN(
          stage.residual.emplace_back(),
          arena_.allocate(rb, rb.compute_dtype(), {cap.tokens, model_->hidden_size()}));
    }
    stages_.push_back(stage);
    TESSERA_RETURN_IF_ERROR(model_->allocate_activations(static_cast<int32_t>(s), seg, cap.tokens,
                                                         cap.logit_rows, last));
    if (!last) continue;
    TESSERA_ASSIGN_OR_RETURN(logits_,
                             arena_.allocate(b, DType::kF32, {cap.logit_rows, model_->vocab_size()}));
    TESSERA_ASSIGN_OR_RETURN(sampled_, arena_.allocate(b, DType::kI32, {cap.logit_rows}));
  }
  return absl::OkStatus();
}

std::optional<TokenBuckets> StepRunner::padding_buckets(const ExecutionOptions& execution) {
  if (execution.gemm_buckets) return execution.gemm_buckets;
  if (execution.decode_graphs != DecodeGraphs::kOff) return TokenBuckets{};
  return std::nullopt;
}

StepCapacity StepRunner::capacity(const ForwardLimits& limits, const ExecutionOptions& execution) {
  const StepCapacity cap{limits.max_batch_tokens, limits.max_logit_rows};
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
  return StepCapacity{cap.tokens + token_pad, cap.logit_rows + row_pad};
}

ActivationBytes StepRunner::activation_bytes(const ActivationCost& family, int64_t hidden_size,
                                             int64_t vocab_size, const ForwardLimits& limits,
                                             const ExecutionOptions& execution, DType dtype) {
  const StepCapacity cap = capacity(limits, execution);
  const uint64_t tokens = static_cast<uint64_t>(cap.tokens);
  const uint64_t rows = static_cast<uint64_t>(cap.logit_rows);
  // As allocate() sizes them: residual; logits and sampled.
  return ActivationBytes{
      .stage = tokens * (static_cast<uint64_t>(hidden_size) * element_size(dtype) + family.per_token),
      .head = rows * (family.per_logit_row + static_cast<uint64_t>(vocab_size) * sizeof(float) +
                      sizeof(int32_t)),
  };
}

int64_t StepRunner::gemm_rows(const StepBatch& part) const {
  const int64_t n = part.num_tokens();
  if (!execution_.gemm_buckets) return n;
  bool has_prefill = false;
  for (int32_t q = 0; q < part.num_seqs() && !has_prefill; ++q) {
    has_prefill = part.query_start[q + 1] - part.query_start[q] > 1;
  }
  return padded_step_tokens(*execution_.gemm_buckets, n, has_prefill);
}

int64_t StepRunner::logit_gemm_rows(int64_t n_logits) const {
  return execution_.gemm_buckets ? decode_bucket(*execution_.gemm_buckets, n_logits) : n_logits;
}

absl::Status StepRunner::forward(const StepBatch& batch, const KvCache& cache,
                                 std::span<float> logits) {
  return run_step(batch, cache, StepOutput{logits, {}, {}});
}

absl::Status StepRunner::forward_sampled(const StepBatch& batch, const KvCache& cache,
                                         std::span<const SamplingRow> rows,
                                         std::span<int32_t> tokens) {
  return run_step(batch, cache, StepOutput{{}, rows, tokens});
}

absl::Status StepRunner::run_step(const StepBatch& batch, const KvCache& cache,
                                  const StepOutput& output) {
  const int64_t n = batch.num_tokens();
  const int64_t n_logits = static_cast<int64_t>(batch.logits_rows.size());
  const bool sampled = output.logits.empty() && n_logits > 0;
  const bool shaped = sampled ? static_cast<int64_t>(output.rows.size()) == n_logits &&
                                    static_cast<int64_t>(output.tokens.size()) == n_logits
                              : static_cast<int64_t>(output.logits.size()) ==
                                    n_logits * model_->vocab_size();
  if (n <= 0 || n > limits_.max_batch_tokens || n_logits > limits_.max_logit_rows || !shaped) {
    return absl::InternalError(absl::StrCat("forward: batch of ", n, " tokens and ", n_logits,
                                            " logit rows exceeds the limits (",
                                            limits_.max_batch_tokens, ", ", limits_.max_logit_rows,
                                            ") or the logits, rows or tokens span is misshapen"));
  }
  // The caller's host work (overlap_next_step) runs while the devices compute a step that is
  // quick to queue: a decode step's recorded graphs (~0.2 ms). A step queued kernel by kernel
  // (prefill or mixed: milliseconds at hundreds of rows) takes it first, so that what it sends
  // (the last step's tokens) does not wait for the whole step to be queued.
  const bool graph = runs_as_graph(batch);
  if (!graph) {
    if (std::function<void()> work = take_overlapped_work()) work();
  }
  // Every stage's errors, the first one reported.
  absl::Status status;
  if (graph) {
    status = run_graph_step(batch, cache);
  } else if (const int32_t parts = micro_batches(batch); parts > 1) {
    split_step_batch(batch, parts, &parts_);
    ++micro_batched_steps_;
    // Each rank's lane through the parts and stages.
    lanes_->run([&](int32_t r) {
      for (const StepBatchPart& part : parts_) {
        const int64_t m = gemm_rows(part.batch);
        for (size_t s = 0; s < stages_.size(); ++s) {
          stages_[s].segment.rank_backend(r).begin_step(part.batch);
          receive_residual(s, r, part.first_token, part.batch.num_tokens());
          run_stage(s, r, part.batch, m, part.first_token, part.first_logit_row, cache);
        }
      }
    });
  } else {
    const int64_t m = gemm_rows(batch);
    lanes_->run([&](int32_t r) {
      for (size_t s = 0; s < stages_.size(); ++s) {
        stages_[s].segment.rank_backend(r).begin_step(batch);
        receive_residual(s, r, 0, n);
        run_stage(s, r, batch, m, 0, 0, cache);
      }
    });
  }
  Backend& b = *stages_.back().segment.backend;
  const Tensor logits = logits_.rows(0, n_logits);
  const Tensor tokens = sampled_.rows(0, n_logits);
  // Only the int32 tokens cross to the host, not n_logits rows of vocab fp32 logits.
  if (sampled && status.ok()) b.sample(logits, output.rows, tokens);
  // Everything is queued: a graph step's host work runs while the devices compute (on the CPU
  // backend the executor ran it before the step), then the host waits for them (the step's
  // profile).
  if (std::function<void()> work = take_overlapped_work()) work();
  const auto wait_start = std::chrono::steady_clock::now();
  auto waited = [&] {
    device_wait_seconds_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  };
  status.Update(synchronize_all());
  if (!status.ok() || n_logits == 0) {
    waited();
    return status;
  }
  if (sampled) {
    b.copy_to_host(output.tokens.data(), tokens.data, tokens.nbytes());
  } else {
    b.copy_to_host(output.logits.data(), logits.data, logits.nbytes());
  }
  status = b.synchronize();
  waited();
  return status;
}

int32_t StepRunner::micro_batches(const StepBatch& batch) const {
  if (stages_.size() < 2) return 1;
  return std::min(execution_.micro_batches, batch.num_tokens() / execution_.min_micro_batch_tokens);
}

bool StepRunner::runs_as_graph(const StepBatch& batch) const {
  return batch.num_tokens() <= largest_graph_bucket_ && is_decode_step(batch);
}

absl::Status StepRunner::run_graph_step(const StepBatch& batch, const KvCache& cache) {
  const int32_t bucket = static_cast<int32_t>(decode_bucket(graph_buckets_, batch.num_tokens()));
  const int32_t max_context = graph_context_class(batch);
  // Recordings point into the cache they ran with: another cache takes fresh keys.
  if (cache.id() != graph_cache_) {
    if (graph_cache_ != 0) id_ = next_graph_owner();
    graph_cache_ = cache.id();
  }
  pad_decode_step(batch, bucket, max_context, cache.block_size(), &graph_batch_);
  // Each rank records and replays its own graphs (its collectives inside them).
  lane_status_.assign(static_cast<size_t>(lanes_->size()), absl::OkStatus());
  lanes_->run([&](int32_t r) {
    absl::Status& status = lane_status_[static_cast<size_t>(r)];
    for (size_t s = 0; s < stages_.size(); ++s) {
      Backend& b = stages_[s].segment.rank_backend(r);
      b.begin_graph_step(graph_batch_, max_context);
      // The hop between devices stays outside the recordings: each is one device's work.
      receive_residual(s, r, 0, bucket);
      auto ops = [&] { run_stage(s, r, graph_batch_, bucket, 0, 0, cache); };
      const absl::Status ran = b.run_graph(graph_key(id_, s, bucket, max_context), ops);
      if (!ran.ok()) {
        // Nothing of the stage was queued: queue it directly, so that this rank's collectives
        // still meet the other ranks' (which would otherwise wait for ever); the step fails.
        ops();
        status.Update(ran);
      }
    }
  });
  absl::Status status;
  for (const absl::Status& s : lane_status_) status.Update(s);
  if (status.ok()) ++graph_steps_;
  return status;
}

void StepRunner::receive_residual(size_t s, int32_t rank, int64_t first_token, int64_t n) {
  if (s == 0) return;
  const Stage& prev = stages_[s - 1];
  const Tensor residual = stages_[s].residual[rank].rows(first_token, n);
  prev.segment.rank_backend(rank).copy_to(stages_[s].segment.rank_backend(rank), residual.data,
                                          prev.residual[rank].rows(first_token, n).data,
                                          residual.nbytes());
}

void StepRunner::run_stage(size_t s, int32_t rank, const StepBatch& part, int64_t gemm_rows,
                           int64_t first_token, int64_t first_logit_row, const KvCache& cache) {
  const bool last = s + 1 == stages_.size();
  const int64_t n_logits = last ? static_cast<int64_t>(part.logits_rows.size()) : 0;
  model_->run_stage(StagePass{
      .stage = static_cast<int32_t>(s),
      .rank = rank,
      .segment = stages_[s].segment,
      .first_stage = s == 0,
      .last_stage = last,
      .cache = cache,
      .tokens = PassRows{first_token, part.num_tokens(), gemm_rows},
      .logits = PassRows{first_logit_row, n_logits, n_logits > 0 ? logit_gemm_rows(n_logits) : 0},
      .residual = stages_[s].residual[rank],
      .logit_out = last && rank == 0 ? logits_ : Tensor{},
  });
}

absl::Status StepRunner::synchronize_all() {
  absl::Status status;
  for (const Stage& stage : stages_) {
    for (int32_t r = 0; r < stage.segment.num_ranks(); ++r) {
      status.Update(stage.segment.rank_backend(r).synchronize());
      if (Communicator* comm = stage.segment.comm(r); comm != nullptr) status.Update(comm->take_error());
    }
  }
  return status;
}

}  // namespace tessera
