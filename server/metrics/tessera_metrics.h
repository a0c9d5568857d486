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
#include "server/metrics/process_collector.h"
#include "server/metrics/registry.h"

namespace tessera::server {

// Labels of tessera_model_info.
struct ModelInfoLabels {
  std::string model_id;       // the id clients name
  std::string architecture;   // "llama"
  std::string dtype;          // weight dtype ("bf16", "q4_1", ...)
  std::string backend;        // "cpu", "cuda", "hip"
  int64_t max_model_len = 0;  // prompt + max_tokens limit
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

  metrics::Registry& registry() { return registry_; }

 private:
  static constexpr int kNumCodes = 17;   // absl::StatusCode 0..16
  static constexpr int kNumReasons = 6;  // FinishReason kNone..kError
  metrics::Counter& request_counter(absl::StatusCode code, FinishReason reason);
  // Copies stats_ and the tuning counters into the scrape-time metrics (scrape_mu_ held).
  void collect_locked();
  void collect_tuning_locked();

  metrics::Registry registry_;
  metrics::ProcessCollector process_;

  // Requests.
  metrics::Family<metrics::Counter>& requests_;
  std::array<std::array<std::atomic<metrics::Counter*>, kNumReasons>, kNumCodes>
      request_children_{};
  metrics::Gauge& running_;
  metrics::Gauge& waiting_;
  metrics::Histogram& queue_time_;
  metrics::Histogram& ttft_;
  metrics::Histogram& inter_token_;
  metrics::Histogram& e2e_latency_;
  metrics::Counter& prompt_tokens_;
  metrics::Counter& generation_tokens_;

  // Engine steps.
  metrics::Histogram& step_seqs_;
  metrics::Histogram& step_tokens_;
  metrics::Histogram& step_duration_;
  metrics::Counter& preemptions_;
  metrics::Counter& graph_steps_;
  metrics::Counter& micro_batched_steps_;

  // KV cache and devices.
  metrics::Family<metrics::Gauge>& kv_blocks_used_;
  metrics::Family<metrics::Gauge>& kv_blocks_total_;
  metrics::Family<metrics::Gauge>& kv_usage_;
  metrics::Family<metrics::Gauge>& gpu_memory_used_;
  metrics::Family<metrics::Gauge>& gpu_memory_total_;
  metrics::Family<metrics::Gauge>& device_layers_;
  metrics::Family<metrics::Gauge>& device_weight_bytes_;
  metrics::Family<metrics::Gauge>& device_kv_tokens_;

  // Info.
  metrics::Family<metrics::Gauge>& model_info_;
  metrics::Family<metrics::Gauge>& build_info_;

  // GEMM tuning, copied from tuning_ at scrape time.
  metrics::Counter& gemm_tuned_shapes_;
  metrics::Counter& gemm_tuning_seconds_;
  metrics::Counter& gemm_hits_;
  metrics::Counter& gemm_misses_;
  metrics::Family<metrics::Gauge>& gemm_gain_;  // {device, op, shape}

  // Scrape-time state, guarded by scrape_mu_.
  std::mutex scrape_mu_;
  const EngineStats* stats_ = nullptr;
  std::string kv_device_;
  metrics::Gauge* kv_used_child_ = nullptr;
  metrics::Gauge* kv_total_child_ = nullptr;
  metrics::Gauge* kv_usage_child_ = nullptr;
  int64_t prompt_tokens_seen_ = 0;      // stats_->prompt_tokens_total already counted
  int64_t generation_tokens_seen_ = 0;  // stats_->generation_tokens_total already counted
  int64_t graph_steps_seen_ = 0;        // stats_->graph_steps_total already counted
  int64_t micro_batched_steps_seen_ = 0;  // stats_->micro_batched_steps_total already counted
  metrics::Gauge* model_info_child_ = nullptr;
  const ModelTuning* tuning_ = nullptr;
  GemmTuningCounters tuning_seen_;  // tuning_'s totals already counted
};

}  // namespace tessera::server
