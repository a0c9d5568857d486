// tessera's metric set (prefix tessera_, base units, counters ending in _total), named after
// what vLLM/TGI/Triton users know. docs/operations.md lists every metric.
//
// Three ways values arrive:
//  - engine events, through EngineObserver on the engine thread: lock-free updates of children
//    resolved ahead of time (on_finish resolves a {code, finish_reason} child once per pair);
//  - scrape time: collect() copies EngineStats (running, waiting, KV blocks, token totals) into
//    gauges and counters, and the process metrics are read from /proc;
//  - setters the daemon and the GPU backend call (model info, GPU memory per device);
//  - GEMM tuning: scrape-time copies of the model's tuning counters and per-shape gains.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "runtime/engine.h"
#include "runtime/output/engine_observer.h"
#include "runtime/placement/placement_planner.h"
#include "runtime/tuning/model_tuning.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/process_collector.h"

namespace tessera::server {

// Labels of tessera_model_info.
struct ModelInfoLabels {
  std::string model_id;       // the id clients name
  std::string architecture;   // "llama"
  std::string dtype;          // weight dtype ("bf16", "q4_1", ...)
  std::string backend;        // "cpu", "cuda", "hip"
  int64_t max_model_len = 0;  // prompt + max_tokens limit
  std::string quantization;   // linear weights: "none" or "fp8"
  std::string kv_cache_dtype;  // "BF16", "F8_E4M3", ...
};

class TesseraMetrics final : public EngineObserver {
 public:
  // Registers every family; sets tessera_build_info.
  TesseraMetrics();
  TesseraMetrics(const TesseraMetrics&) = delete;
  TesseraMetrics& operator=(const TesseraMetrics&) = delete;

  // EngineObserver (engine thread; lock-free except the first finish of each {code, reason}).
  void on_step(const StepReport& step) override;
  void on_first_token(double ttft_seconds) override;
  void on_inter_token(double seconds) override;
  void on_preemption() override;
  void on_finish(const FinishReport& report) override;

  // A request answered before it reached the engine (invalid argument, queue full, draining):
  // counted in tessera_requests_total with finish_reason="none". Any thread.
  void on_rejected(absl::StatusCode code);

  // An HTTP response of `listener` ("openai", "admin") on `route` (the registered path, or
  // "unmatched") with `status`: tessera_http_requests_total. Any thread; takes the family's
  // mutex (once per request, not per token).
  void on_http_response(std::string_view listener, std::string_view route, int status);

  // The engine whose stats collect() reads (not owned; null detaches, and a scrape in progress
  // finishes first, so the engine may be destroyed once this returns). `kv_device` labels the KV
  // cache gauges. Token counters go on from where they were when the engine changes.
  void set_engine_stats(const EngineStats* stats, std::string kv_device = "cpu");
  // Sets tessera_model_info (one series; replaces the previous model's).
  void set_model_info(const ModelInfoLabels& info);
  // GPU memory of `device` ("cuda:0", "hip:1"), for the GPU backend to call whenever it
  // measures (takes a mutex briefly: not per token). Never called on the CPU backend, so the
  // gauges have no series there.
  void set_gpu_memory(std::string_view device, double used_bytes, double total_bytes);
  // The placement plan: per device (label "device", the backend's name) its decoder layers,
  // weight bytes and KV capacity in tokens. Called once, when the model is loaded.
  void set_placement(const PlacementPlan& plan);

  // The model tuning whose counters and gains collect() reads (not owned; null detaches, after
  // which it may be destroyed). Counters go on from where they were when it changes.
  void set_gemm_tuning(const ModelTuning* tuning);

  // Refreshes the scrape-time values from the engine's stats.
  void collect();
  // collect(), then every family (registry and process metrics) in the text format 0.0.4.
  std::string serialize();

  prometheus::Registry& registry() { return registry_; }


 private:
  static constexpr int kNumCodes = 17;   // absl::StatusCode 0..16
  static constexpr int kNumReasons = 6;  // FinishReason kNone..kError
  prometheus::Counter& request_counter(absl::StatusCode code, FinishReason reason);
  // Copies stats_ and the tuning counters into the scrape-time metrics (scrape_mu_ held).
  void collect_locked();
  void collect_tuning_locked();

  prometheus::Registry registry_;
  ProcessCollector process_;

  // Requests.
  prometheus::Family<prometheus::Counter>& requests_;
  std::array<std::array<std::atomic<prometheus::Counter*>, kNumReasons>, kNumCodes>
      request_children_{};
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Histogram& queue_time_;
  prometheus::Histogram& ttft_;
  prometheus::Histogram& inter_token_;
  prometheus::Histogram& e2e_latency_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;

  prometheus::Family<prometheus::Counter>& http_requests_;  // {listener, route, code}

  // Engine steps.
  prometheus::Histogram& step_seqs_;
  prometheus::Histogram& step_tokens_;
  prometheus::Histogram& step_duration_;
  // Where the steps' time went, {phase}: schedule, launch, overlapped, device_wait, update.
  prometheus::Family<prometheus::Counter>& step_phase_seconds_;
  prometheus::Counter& step_schedule_seconds_;
  prometheus::Counter& step_launch_seconds_;
  prometheus::Counter& step_overlapped_seconds_;
  prometheus::Counter& step_device_wait_seconds_;
  prometheus::Counter& step_update_seconds_;
  prometheus::Counter& preemptions_;
  prometheus::Counter& graph_steps_;
  prometheus::Counter& micro_batched_steps_;

  // Prefix cache (tokens, as vLLM counts them).
  prometheus::Counter& prefix_queries_;
  prometheus::Counter& prefix_hits_;
  prometheus::Gauge& prefix_hit_ratio_;
  prometheus::Gauge& prefix_blocks_;

  // KV cache and devices.
  prometheus::Family<prometheus::Gauge>& kv_blocks_used_;
  prometheus::Family<prometheus::Gauge>& kv_blocks_total_;
  prometheus::Family<prometheus::Gauge>& kv_usage_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_used_;
  prometheus::Family<prometheus::Gauge>& gpu_memory_total_;
  prometheus::Family<prometheus::Gauge>& device_layers_;
  prometheus::Family<prometheus::Gauge>& device_weight_bytes_;
  prometheus::Family<prometheus::Gauge>& device_kv_tokens_;
  prometheus::Gauge& tensor_parallel_size_;

  // Info.
  prometheus::Family<prometheus::Gauge>& model_info_;
  prometheus::Family<prometheus::Gauge>& build_info_;

  // GEMM tuning, copied from tuning_ at scrape time.
  prometheus::Counter& gemm_tuned_shapes_;
  prometheus::Counter& gemm_tuning_seconds_;
  prometheus::Counter& gemm_hits_;
  prometheus::Counter& gemm_misses_;
  prometheus::Family<prometheus::Gauge>& gemm_gain_;  // {device, op, shape}

  // Scrape-time state, guarded by scrape_mu_.
  std::mutex scrape_mu_;
  const EngineStats* stats_ = nullptr;
  std::string kv_device_;
  prometheus::Gauge* kv_used_child_ = nullptr;
  prometheus::Gauge* kv_total_child_ = nullptr;
  prometheus::Gauge* kv_usage_child_ = nullptr;
  int64_t prompt_tokens_seen_ = 0;      // stats_->prompt_tokens_total already counted
  int64_t generation_tokens_seen_ = 0;  // stats_->generation_tokens_total already counted
  int64_t graph_steps_seen_ = 0;        // stats_->graph_steps_total already counted
  int64_t micro_batched_steps_seen_ = 0;  // stats_->micro_batched_steps_total already counted
  int64_t prefix_queries_seen_ = 0;     // stats_->prefix_cache_queries_total already counted
  int64_t prefix_hits_seen_ = 0;        // stats_->prefix_cache_hits_total already counted
  prometheus::Gauge* model_info_child_ = nullptr;
  const ModelTuning* tuning_ = nullptr;
  GemmTuningCounters tuning_seen_;  // tuning_'s totals already counted
};

}  // namespace tessera::server
