#include "server/metrics/tessera_metrics.h"

#include <utility>

#include "prometheus/text_serializer.h"
#include "runtime/tokenizer/utf8.h"
#include "server/metrics/serving_buckets.h"

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif
#ifndef TESSERA_GPU_BACKEND
#define TESSERA_GPU_BACKEND "unknown"
#endif
#ifndef TESSERA_BUILD_TYPE
#define TESSERA_BUILD_TYPE "unknown"
#endif

namespace tessera::server {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

// A label value from outside the code (a model file's name): prometheus-cpp writes label values
// as they are, and the text format needs UTF-8, so invalid bytes become U+FFFD.
std::string label_value(std::string_view value) {
  return sanitize_utf8(value);
}

const char* compiler_name() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

TesseraMetrics::TesseraMetrics()
    : requests_(BuildCounter()
                    .Name("tessera_requests_total")
                    .Help("Requests finished, by gRPC status code and finish reason (none: "
                          "answered before reaching the engine).")
                    .Register(registry_)),
      running_(BuildGauge()
                   .Name("tessera_num_requests_running")
                   .Help("Requests running in the engine's batch.")
                   .Register(registry_)
                   .Add({})),
      waiting_(BuildGauge()
                   .Name("tessera_num_requests_waiting")
                   .Help("Requests admitted to the engine and waiting to be scheduled.")
                   .Register(registry_)
                   .Add({})),
      queue_time_(BuildHistogram()
                      .Name("tessera_request_queue_time_seconds")
                      .Help("Time from arrival to first being scheduled.")
                      .Register(registry_)
                      .Add({}, queue_time_buckets())),
      ttft_(BuildHistogram()
                .Name("tessera_time_to_first_token_seconds")
                .Help("Time from arrival to the first generated token.")
                .Register(registry_)
                .Add({}, ttft_buckets())),
      inter_token_(BuildHistogram()
                       .Name("tessera_inter_token_latency_seconds")
                       .Help("Time between two consecutive generated tokens of one request.")
                       .Register(registry_)
                       .Add({}, inter_token_buckets())),
      e2e_latency_(BuildHistogram()
                       .Name("tessera_e2e_request_latency_seconds")
                       .Help("Time from arrival to the last output of a request that reached the "
                             "engine.")
                       .Register(registry_)
                       .Add({}, request_latency_buckets())),
      prompt_tokens_(BuildCounter()
                         .Name("tessera_prompt_tokens_total")
                         .Help("Prompt tokens of requests the engine has scheduled.")
                         .Register(registry_)
                         .Add({})),
      generation_tokens_(BuildCounter()
                             .Name("tessera_generation_tokens_total")
                             .Help("Tokens generated.")
                             .Register(registry_)
                             .Add({})),
      http_requests_(BuildCounter()
                         .Name("tessera_http_requests_total")
                         .Help("HTTP requests answered, by listener, route and status code.")
                         .Register(registry_)),
      step_seqs_(BuildHistogram()
                     .Name("tessera_step_num_seqs")
                     .Help("Sequences in one engine step's batch.")
                     .Register(registry_)
                     .Add({}, step_seqs_buckets())),
      step_tokens_(
          BuildHistogram()
              .Name("tessera_step_num_tokens")
              .Help("Tokens in one engine step's batch (decode tokens and prefill chunks).")
              .Register(registry_)
              .Add({}, step_tokens_buckets())),
      step_duration_(BuildHistogram()
                         .Name("tessera_step_duration_seconds")
                         .Help("Duration of one engine step (forward, sampling, emission).")
                         .Register(registry_)
                         .Add({}, step_duration_buckets())),
      step_phase_seconds_(BuildCounter()
                              .Name("tessera_step_phase_seconds_total")
                              .Help("Engine steps' wall time by phase: schedule (admission, "
                                    "preemption, batch building), launch (the host issuing the "
                                    "forward and sampling), overlapped (the host sending the "
                                    "previous step's outputs while the device runs), device_wait "
                                    "(the host waiting for the device), update (output "
                                    "processing, final messages).")
                              .Register(registry_)),
      step_schedule_seconds_(step_phase_seconds_.Add({{"phase", "schedule"}})),
      step_launch_seconds_(step_phase_seconds_.Add({{"phase", "launch"}})),
      step_overlapped_seconds_(step_phase_seconds_.Add({{"phase", "overlapped"}})),
      step_device_wait_seconds_(step_phase_seconds_.Add({{"phase", "device_wait"}})),
      step_update_seconds_(step_phase_seconds_.Add({{"phase", "update"}})),
      preemptions_(BuildCounter()
                       .Name("tessera_num_preemptions_total")
                       .Help("Sequences preempted (by recompute) to free KV cache blocks.")
                       .Register(registry_)
                       .Add({})),
      graph_steps_(BuildCounter()
                       .Name("tessera_decode_graph_steps_total")
                       .Help("Engine steps run through recorded decode graphs (decode_graphs).")
                       .Register(registry_)
                       .Add({})),
      micro_batched_steps_(BuildCounter()
                               .Name("tessera_micro_batched_steps_total")
                               .Help("Engine steps split into micro-batches through the devices "
                                     "of a split model (micro_batches).")
                               .Register(registry_)
                               .Add({})),
      prefix_queries_(BuildCounter()
                          .Name("tessera_prefix_cache_queries_total")
                          .Help("Prompt tokens looked up in the prefix cache (a preempted "
                                "sequence's again when it is recomputed).")
                          .Register(registry_)
                          .Add({})),
      prefix_hits_(BuildCounter()
                       .Name("tessera_prefix_cache_hits_total")
                       .Help("Prompt tokens found in the prefix cache, not prefilled again.")
                       .Register(registry_)
                       .Add({})),
      prefix_hit_ratio_(BuildGauge()
                            .Name("tessera_prefix_cache_hit_ratio")
                            .Help("Prefix cache hits / queries since start, in tokens (0 before "
                                  "any query).")
                            .Register(registry_)
                            .Add({})),
      prefix_blocks_(BuildGauge()
                         .Name("tessera_prefix_cache_blocks")
                         .Help("KV cache blocks holding cached prefixes, in use or evictable.")
                         .Register(registry_)
                         .Add({})),
      kv_blocks_used_(BuildGauge()
                          .Name("tessera_kv_cache_used_blocks")
                          .Help("KV cache blocks in use, per device.")
                          .Register(registry_)),
      kv_blocks_total_(BuildGauge()
                           .Name("tessera_kv_cache_capacity_blocks")
                           .Help("KV cache blocks in all, per device.")
                           .Register(registry_)),
      kv_usage_(BuildGauge()
                    .Name("tessera_kv_cache_usage_ratio")
                    .Help("Share of KV cache blocks in use, per device (0 to 1).")
                    .Register(registry_)),
      gpu_memory_used_(BuildGauge()
                           .Name("tessera_gpu_memory_used_bytes")
                           .Help("GPU memory in use, per device.")
                           .Register(registry_)),
      gpu_memory_total_(BuildGauge()
                            .Name("tessera_gpu_memory_total_bytes")
                            .Help("GPU memory, per device.")
                            .Register(registry_)),
      device_layers_(BuildGauge()
                         .Name("tessera_device_layers")
                         .Help("Decoder layers placed on each device.")
                         .Register(registry_)),
      device_weight_bytes_(BuildGauge()
                               .Name("tessera_device_weight_bytes")
                               .Help("Model weight bytes placed on each device.")
                               .Register(registry_)),
      device_kv_tokens_(BuildGauge()
                            .Name("tessera_device_kv_capacity_tokens")
                            .Help("KV cache capacity in tokens of the layers on each device.")
                            .Register(registry_)),
      tensor_parallel_size_(BuildGauge()
                                .Name("tessera_tensor_parallel_size")
                                .Help("Devices each pipeline stage's layers are split over.")
                                .Register(registry_)
                                .Add({})),
      model_info_(BuildGauge()
                      .Name("tessera_model_info")
                      .Help("The served model (value 1).")
                      .Register(registry_)),
      build_info_(BuildGauge()
                      .Name("tessera_build_info")
                      .Help("The tesserad build (value 1).")
                      .Register(registry_)),
      gemm_tuned_shapes_(BuildCounter()
                             .Name("tessera_gemm_tuned_shapes_total")
                             .Help("GEMM shapes tuned (on first use or by a warmup).")
                             .Register(registry_)
                             .Add({})),
      gemm_tuning_seconds_(BuildCounter()
                               .Name("tessera_gemm_tuning_seconds_total")
                               .Help("Time spent tuning GEMMs.")
                               .Register(registry_)
                               .Add({})),
      gemm_hits_(BuildCounter()
                     .Name("tessera_gemm_tuned_hits_total")
                     .Help("GEMM solution lookups that found a tuned solution (backends cache "
                           "answers, so these count distinct lookups, not GEMM calls).")
                     .Register(registry_)
                     .Add({})),
      gemm_misses_(BuildCounter()
                       .Name("tessera_gemm_tuned_misses_total")
                       .Help("GEMM solution lookups that found no tuned solution.")
                       .Register(registry_)
                       .Add({})),
      gemm_gain_(BuildGauge()
                     .Name("tessera_gemm_tuning_gain_ratio")
                     .Help("Default solution's time over the tuned one's, per GEMM tuned in this "
                           "process.")
                     .Register(registry_)) {
  build_info_
      .Add({{"version", TESSERA_VERSION},
            {"gpu_backend", TESSERA_GPU_BACKEND},
            {"build_type", TESSERA_BUILD_TYPE},
            {"compiler", compiler_name()}})
      .Set(1);
}

prometheus::Counter& TesseraMetrics::request_counter(absl::StatusCode code, FinishReason reason) {
  int c = static_cast<int>(code);
  if (c < 0 || c >= kNumCodes) c = static_cast<int>(absl::StatusCode::kUnknown);
  int r = static_cast<int>(reason);
  if (r < 0 || r >= kNumReasons) r = static_cast<int>(FinishReason::kNone);
  std::atomic<prometheus::Counter*>& slot = request_children_[c][r];
  if (prometheus::Counter* child = slot.load(std::memory_order_acquire)) return *child;
  // First request with this pair: create the series (Family::Add takes its mutex once).
  prometheus::Counter& child =
      requests_.Add({{"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(c))},
                     {"finish_reason", finish_reason_name(static_cast<FinishReason>(r))}});
  slot.store(&child, std::memory_order_release);
  return child;
}

void TesseraMetrics::on_step(const StepReport& step) {
  step_seqs_.Observe(step.num_seqs);
  step_tokens_.Observe(step.num_tokens);
  step_duration_.Observe(step.seconds);
  step_schedule_seconds_.Increment(step.schedule_seconds);
  step_launch_seconds_.Increment(step.launch_seconds);
  step_overlapped_seconds_.Increment(step.overlapped_seconds);
  step_device_wait_seconds_.Increment(step.device_wait_seconds);
  step_update_seconds_.Increment(step.update_seconds);
}

void TesseraMetrics::on_first_token(double ttft_seconds) {
  ttft_.Observe(ttft_seconds);
}

void TesseraMetrics::on_inter_token(double seconds) {
  inter_token_.Observe(seconds);
}

void TesseraMetrics::on_preemption() {
  preemptions_.Increment();
}

void TesseraMetrics::on_finish(const FinishReport& report) {
  request_counter(report.code, report.reason).Increment();
  // 0 means the request was never scheduled (cancelled while waiting): no queue time to count.
  if (report.queue_seconds > 0) queue_time_.Observe(report.queue_seconds);
  e2e_latency_.Observe(report.total_seconds);
}

void TesseraMetrics::on_rejected(absl::StatusCode code) {
  request_counter(code, FinishReason::kNone).Increment();
}

void TesseraMetrics::on_http_response(std::string_view listener, std::string_view route,
                                      int status) {
  http_requests_
      .Add({{"listener", std::string(listener)},
            {"route", std::string(route)},
            {"code", std::to_string(status)}})
      .Increment();
}

void TesseraMetrics::set_engine_stats(const EngineStats* stats, std::string kv_device) {
  std::lock_guard<std::mutex> lock(scrape_mu_);
  if (stats == stats_ && kv_device == kv_device_) return;
  collect_locked();  // count the old engine's last tokens
  if (stats != stats_) {
    prompt_tokens_seen_ = 0;
    generation_tokens_seen_ = 0;
    graph_steps_seen_ = 0;
    micro_batched_steps_seen_ = 0;
  }
  if (kv_used_child_ != nullptr) kv_blocks_used_.Remove(kv_used_child_);
  if (kv_total_child_ != nullptr) kv_blocks_total_.Remove(kv_total_child_);
  if (kv_usage_child_ != nullptr) kv_usage_.Remove(kv_usage_child_);
  kv_used_child_ = kv_total_child_ = kv_usage_child_ = nullptr;
  stats_ = stats;
  kv_device_ = std::move(kv_device);
  if (stats_ == nullptr) {
    running_.Set(0);
    waiting_.Set(0);
    return;
  }
  const prometheus::Labels device = {{"device", kv_device_}};
  kv_used_child_ = &kv_blocks_used_.Add(device);
  kv_total_child_ = &kv_blocks_total_.Add(device);
  kv_usage_child_ = &kv_usage_.Add(device);
  collect_locked();
}

void TesseraMetrics::set_model_info(const ModelInfoLabels& info) {
  std::lock_guard<std::mutex> lock(scrape_mu_);
  if (model_info_child_ != nullptr) model_info_.Remove(model_info_child_);
  model_info_child_ = &model_info_.Add({{"model_id", label_value(info.model_id)},
                                        {"architecture", label_value(info.architecture)},
                                        {"dtype", label_value(info.dtype)},
                                        {"backend", label_value(info.backend)},
                                        {"max_model_len", std::to_string(info.max_model_len)},
                                        {"quantization", label_value(info.quantization)},
                                        {"kv_cache_dtype", label_value(info.kv_cache_dtype)}});
  model_info_child_->Set(1);
}

void TesseraMetrics::set_gpu_memory(std::string_view device, double used_bytes,
                                    double total_bytes) {
  const prometheus::Labels labels = {{"device", label_value(device)}};
  gpu_memory_used_.Add(labels).Set(used_bytes);
  gpu_memory_total_.Add(labels).Set(total_bytes);
}

void TesseraMetrics::set_placement(const PlacementPlan& plan) {
  tensor_parallel_size_.Set(plan.tensor_parallel_size);
  for (const DevicePlacement& d : plan.devices) {
    // A stage of tensor-parallel ranks: each of its devices holds the same per-device figures.
    const std::vector<std::string> names =
        d.rank_names.empty() ? std::vector<std::string>{d.name} : d.rank_names;
    for (const std::string& name : names) {
      const prometheus::Labels labels = {{"device", label_value(name)}};
      device_layers_.Add(labels).Set(d.num_layers());
      device_weight_bytes_.Add(labels).Set(static_cast<double>(d.weight_bytes));
      device_kv_tokens_.Add(labels).Set(static_cast<double>(d.kv_capacity_tokens));
    }
  }
}

void TesseraMetrics::set_gemm_tuning(const ModelTuning* tuning) {
  std::lock_guard<std::mutex> lock(scrape_mu_);
  collect_tuning_locked();  // count the old model's last tuning
  tuning_ = tuning;
  tuning_seen_ = GemmTuningCounters{};
}

void TesseraMetrics::collect_tuning_locked() {
  if (tuning_ == nullptr) return;
  const GemmTuningStats stats = tuning_->stats();
  const auto follow = [](prometheus::Counter& counter, double now, double& seen) {
    if (now > seen) counter.Increment(now - seen);
    seen = now;
  };
  double shapes = static_cast<double>(tuning_seen_.shapes_tuned);
  double hits = static_cast<double>(tuning_seen_.hits);
  double misses = static_cast<double>(tuning_seen_.misses);
  follow(gemm_tuned_shapes_, static_cast<double>(stats.totals.shapes_tuned), shapes);
  follow(gemm_hits_, static_cast<double>(stats.totals.hits), hits);
  follow(gemm_misses_, static_cast<double>(stats.totals.misses), misses);
  follow(gemm_tuning_seconds_, stats.totals.tuning_seconds, tuning_seen_.tuning_seconds);
  tuning_seen_.shapes_tuned = stats.totals.shapes_tuned;
  tuning_seen_.hits = stats.totals.hits;
  tuning_seen_.misses = stats.totals.misses;
  for (const GemmGain& g : stats.gains) {
    gemm_gain_
        .Add({{"device", std::to_string(g.device)},
              {"op", g.signature.op_name()},
              {"shape", g.signature.params()}})
        .Set(g.gain);
  }
}

void TesseraMetrics::collect_locked() {
  collect_tuning_locked();
  if (stats_ == nullptr) return;
  running_.Set(static_cast<double>(stats_->running.load(std::memory_order_relaxed)));
  waiting_.Set(static_cast<double>(stats_->waiting.load(std::memory_order_relaxed)));
  const int64_t used = stats_->kv_blocks_used.load(std::memory_order_relaxed);
  const int64_t total = stats_->kv_blocks_total.load(std::memory_order_relaxed);
  kv_used_child_->Set(static_cast<double>(used));
  kv_total_child_->Set(static_cast<double>(total));
  kv_usage_child_->Set(total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0);
  // Counters follow the engine's totals by their increase since the last scrape.
  const auto follow = [](prometheus::Counter& counter, int64_t now, int64_t& seen) {
    if (now > seen) counter.Increment(static_cast<double>(now - seen));
    seen = now;
  };
  follow(prompt_tokens_, stats_->prompt_tokens_total.load(std::memory_order_relaxed),
         prompt_tokens_seen_);
  follow(generation_tokens_, stats_->generation_tokens_total.load(std::memory_order_relaxed),
         generation_tokens_seen_);
  follow(graph_steps_, stats_->graph_steps_total.load(std::memory_order_relaxed), graph_steps_seen_);
  follow(micro_batched_steps_, stats_->micro_batched_steps_total.load(std::memory_order_relaxed),
         micro_batched_steps_seen_);
  const int64_t queries = stats_->prefix_cache_queries_total.load(std::memory_order_relaxed);
  const int64_t hits = stats_->prefix_cache_hits_total.load(std::memory_order_relaxed);
  follow(prefix_queries_, queries, prefix_queries_seen_);
  follow(prefix_hits_, hits, prefix_hits_seen_);
  prefix_hit_ratio_.Set(queries > 0 ? static_cast<double>(hits) / static_cast<double>(queries) : 0.0);
  prefix_blocks_.Set(static_cast<double>(stats_->prefix_cache_blocks.load(std::memory_order_relaxed)));
}

void TesseraMetrics::collect() {
  std::lock_guard<std::mutex> lock(scrape_mu_);
  collect_locked();
}

std::string TesseraMetrics::serialize() {
  std::vector<prometheus::MetricFamily> families;
  {
    std::lock_guard<std::mutex> lock(scrape_mu_);
    collect_locked();
    families = registry_.Collect();
  }
  for (prometheus::MetricFamily& family : process_.Collect()) families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace tessera::server
