// The engine: one thread per model that owns every Sequence, the schedulers, the KV cache and
// the model's device work. Each step reads schedule -> execute -> update:
//   schedule  run pending admin jobs (prefix-cache resets), take new requests, drop cancelled
//             ones, let the capacity scheduler admit (reusing cached prefixes) and preempt, and
//             the step scheduler build one flattened batch;
//   execute   run the batch through the model and sample (runtime/runner/step_executor.h);
//   update    advance each sequence, register its newly computed full blocks in the prefix
//             cache, and hand its token to output processing
//             (runtime/output/output_processor.h), which decides whether it finishes.
// A step's outputs that do not finish their request are held and go to the streams in the next
// step's execute (StepExecutor's while_device_runs: during a decode graph step's device time,
// so that pushing them and waking their readers is host work the device does not wait for); a
// request's final message is sent at once (after any output of it still held).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/output/engine_observer.h"
#include "runtime/output/output_processor.h"
#include "runtime/request/request.h"
#include "runtime/runner/forward_model.h"
#include "runtime/runner/step_executor.h"
#include "runtime/scheduler/capacity_scheduler.h"
#include "runtime/scheduler/step_scheduler.h"
#include "runtime/scheduler/sequence.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct EngineConfig {
  int32_t max_num_seqs = 256;  // running at once
  int32_t max_queue = 1024;    // submitted but not yet running
  int32_t max_model_len = 0;   // prompt + max_tokens limit; 0 = unlimited (set from the model)
  // Keep full KV blocks after their sequence and reuse them for prompts that start the same way.
  bool enable_prefix_caching = true;
  // A new sequence is admitted only while the KV blocks left free after it cover every running
  // sequence's next this-many decode tokens (CapacityScheduler); 0: whenever its tokens fit.
  int32_t admission_headroom_steps = 16;
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
  // Prefix cache, in tokens as vLLM counts them: every admitted sequence's tokens are queried
  // (a preempted one's again when it returns), and those found cached are hits (never
  // prefilled). Hit rate = hits / queries.
  std::atomic<int64_t> prefix_cache_queries_total{0};
  std::atomic<int64_t> prefix_cache_hits_total{0};
  std::atomic<int64_t> prefix_cache_blocks{0};  // blocks holding cached K/V, in use or evictable
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

  // Drops every cached prefix block, on the engine thread at its next step, then calls
  // done(blocks that held cached K/V) there (at once with 0 once shutdown() has begun). Blocks in
  // use stay with their sequences, which share them with no later request and cache nothing
  // more: after a reset nothing computed before it is reused. A callback rather than a future,
  // so that a caller on an event loop (the admin listener) never blocks waiting for it.
  void reset_prefix_cache(std::function<void(int32_t dropped)> done);

  // The model fault: set when a step's sampling gives a token outside the vocabulary -- the
  // samplers answer -1 for logits that are not finite (NaN or inf), which later steps of the same
  // model would only repeat. The engine then serves nothing more: the requests that sampled it
  // fail INTERNAL, every other one in flight and every later submit() UNAVAILABLE, all saying
  // why. OK while the model is healthy. Any thread.
  absl::Status fault() const;
  // Called once, on the engine thread, with fault() once it is set (the daemon takes readiness
  // and health to NOT_SERVING). Set before start().
  void set_fault_listener(std::function<void(const absl::Status&)> listener);

  const EngineStats& stats() const { return stats_; }
  // Reports steps, token latencies and finished requests to `observer` (not owned; set before
  // start()).
  void set_observer(EngineObserver* observer);
  const EngineConfig& config() const { return config_; }

 private:
  void run_loop();
  // schedule: new requests in, cancelled ones out, admission and preemption, then the step's
  // batch (batch_) and its chunks; empty when there is nothing to run.
  std::vector<ScheduledChunk> schedule();
  // execute: the batch through the model, and each sampled row's token; the last step's held
  // outputs sent meanwhile (their time in report.overlapped_seconds).
  absl::StatusOr<std::span<const SampleResult>> execute(const std::vector<ScheduledChunk>& chunks,
                                                        StepReport& report);
  // update: each chunk's sequence advanced and its token, if it sampled one, processed; then the
  // step reported (`report` arrives with its schedule, launch and device-wait times).
  void update(const std::vector<ScheduledChunk>& chunks, std::span<const SampleResult> samples,
              Clock::time_point start, StepReport report);
  void run_prefix_cache_resets();
  void take_new_requests();
  void reap_cancelled();
  // Sends the request its last message (after its held output, if any) and frees the sequence.
  void finish(Sequence* seq, FinishReason reason, absl::Status status, RequestOutput out = {});
  // Sends every sequence's held output (SequenceOutput::held) to its stream.
  void send_held_outputs();
  void fail_all(const absl::Status& status);
  // A sampled token outside the vocabulary: the model fault (see fault()). The first one sets it;
  // the step's end (stop_after_fault) fails everything else.
  void declare_fault(int32_t token);
  void stop_after_fault();
  void publish_stats();

  ForwardModel& model_;
  KvCache& cache_;
  const Tokenizer& tokenizer_;
  StepExecutor executor_;
  OutputProcessor output_;
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
  std::vector<std::function<void(int32_t)>> prefix_cache_resets_;  // asked for, not yet run
  std::atomic<int64_t> queued_{0};  // inbox + waiting
  std::atomic<int64_t> in_flight_{0};  // inbox + waiting + running
  bool admitting_ = true;
  bool stopping_ = false;
  absl::Status fault_;  // OK until the model fault
  std::function<void(const absl::Status&)> fault_listener_;
  std::thread thread_;

  // Engine thread only.
  uint64_t next_order_ = 0;
  std::vector<std::unique_ptr<Sequence>> sequences_;  // owns every live sequence
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  StepBatch batch_;
  std::vector<RowSampler> row_samplers_;  // [logit rows] who samples each row of the step
  bool faulted_ = false;                  // fault_ is set; stop_after_fault has not run yet
  std::string fault_reason_;              // what the fault was, once there is one
  bool fault_handled_ = false;            // stop_after_fault ran
};

}  // namespace tessera
