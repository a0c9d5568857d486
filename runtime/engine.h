// The engine: one thread per model that owns every Sequence, the schedulers, the KV cache and
// the model's device work. Each step: take new requests, drop cancelled ones, let the capacity
// scheduler admit/preempt, let the step scheduler build one flattened batch, run the model,
// sample, and emit to each request's stream.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine_observer.h"
#include "runtime/kv_cache.h"
#include "runtime/model/forward_model.h"
#include "runtime/request.h"
#include "runtime/scheduler/capacity_scheduler.h"
#include "runtime/scheduler/step_scheduler.h"
#include "runtime/sequence.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct EngineConfig {
  int32_t max_num_seqs = 256;  // running at once
  int32_t max_queue = 1024;    // submitted but not yet running
  int32_t max_model_len = 0;   // prompt + max_tokens limit; 0 = unlimited (set from the model)
};

// Counters and gauges the engine keeps for metrics and tests (written by the engine thread,
// read from anywhere).
struct EngineStats {
  std::atomic<int64_t> running{0};
  std::atomic<int64_t> waiting{0};
  std::atomic<int64_t> kv_blocks_used{0};
  std::atomic<int64_t> kv_blocks_total{0};
  std::atomic<int64_t> steps_total{0};
  std::atomic<int64_t> preemptions_total{0};
  std::atomic<int64_t> prompt_tokens_total{0};
  std::atomic<int64_t> generation_tokens_total{0};
  std::atomic<int64_t> graph_steps_total{0};  // steps the model ran through decode graphs
  std::atomic<int64_t> micro_batched_steps_total{0};  // steps split into micro-batches
};

class Engine {
 public:
  Engine(ForwardModel& model, KvCache& cache, const Tokenizer& tokenizer, EngineConfig config);
  ~Engine();

  // Validates the request against the engine's limits and queues it. Errors: INVALID_ARGUMENT
  // (empty prompt, token id outside the vocab), OUT_OF_RANGE (can never fit the context or the
  // KV cache), RESOURCE_EXHAUSTED (queue full), UNAVAILABLE (draining or stopped).
  absl::StatusOr<RequestHandle> submit(std::shared_ptr<Request> request);

  // Runs steps on a background thread until shutdown().
  void start();
  // Stops accepting new requests (submit answers UNAVAILABLE); in-flight ones go on.
  void stop_admitting();
  // True when nothing is queued, waiting or running.
  bool idle() const;
  // Cancels everything in flight with `status`, stops the thread, and returns once it is gone.
  void shutdown(absl::Status status);

  // One step on the calling thread (tests; not while start()ed). False when there was no work.
  bool step();

  const EngineStats& stats() const { return stats_; }
  // Reports steps, token latencies and finished requests to `observer` (not owned; set before
  // start()).
  void set_observer(EngineObserver* observer) { observer_ = observer; }
  const EngineConfig& config() const { return config_; }

 private:
  void run_loop();
  void take_new_requests();
  void reap_cancelled();
  void finish(Sequence* seq, FinishReason reason, absl::Status status, RequestOutput out = {});
  // Appends a sampled token, detokenizes, checks stops; true when the sequence is finished.
  bool accept_token(Sequence* seq, const SampleResult& sample, RequestOutput& out,
                    FinishReason& reason);
  // Whether this step's logit rows are sampled by the model on its device: when it can and every
  // sampled row is plain (see Sampler::plain_row); fills sample_rows_ then.
  bool sample_on_device(const std::vector<ScheduledChunk>& chunks);
  void fail_all(const absl::Status& status);
  void publish_stats();

  ForwardModel& model_;
  KvCache& cache_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  CapacityScheduler capacity_;
  StepScheduler step_scheduler_;
  EngineStats stats_;
  EngineObserver default_observer_;
  EngineObserver* observer_ = &default_observer_;

  // Shared with submitters.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<RequestHandle> inbox_;
  std::atomic<int64_t> queued_{0};  // inbox + waiting
  std::atomic<int64_t> in_flight_{0};  // inbox + waiting + running
  bool admitting_ = true;
  bool stopping_ = false;
  std::thread thread_;

  // Engine thread only.
  uint64_t next_order_ = 0;
  std::vector<std::unique_ptr<Sequence>> sequences_;  // owns every live sequence
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  StepBatch batch_;
  std::vector<float> logits_;  // [max_logit_rows, vocab]
  std::vector<SamplingRow> sample_rows_;  // [logit rows] when the model samples on its device
  std::vector<int32_t> sampled_;          // [max_logit_rows] the tokens it sampled
  SamplingScratch sampling_scratch_;      // the host sampler's vocab-sized buffers, for every sequence
};

}  // namespace tessera
