#include "server/metrics/tessera_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/unit/metrics/exposition_samples.h"

namespace tessera::server {
namespace {

using tessera::testing::exposition_samples;
using tessera::testing::sample;

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

// A few requests' worth of engine events.
void feed_workload(TesseraMetrics& m) {
  m.on_step(StepReport{.seconds = 0.020, .num_seqs = 4, .num_tokens = 64, .prefill_tokens = 60,
                       .decode_tokens = 4, .schedule_seconds = 0.001, .launch_seconds = 0.002,
                       .overlapped_seconds = 0.0004, .device_wait_seconds = 0.0175,
                       .update_seconds = 0.0005});
  m.on_step(StepReport{.seconds = 0.004, .num_seqs = 4, .num_tokens = 4, .prefill_tokens = 0,
                       .decode_tokens = 4, .schedule_seconds = 0.001, .launch_seconds = 0.001,
                       .overlapped_seconds = 0.0001, .device_wait_seconds = 0.0025,
                       .update_seconds = 0.0005});
  m.on_first_token(0.15);
  m.on_inter_token(0.03);
  m.on_inter_token(0.03);
  m.on_inter_token(0.2);
  m.on_preemption();
  m.on_finish(FinishReport{FinishReason::kStop, absl::StatusCode::kOk, 10, 4, 0.01, 0.15, 0.3});
  m.on_finish(FinishReport{FinishReason::kLength, absl::StatusCode::kOk, 12, 16, 0.02, 0.2, 1.1});
  // Cancelled while waiting: never scheduled, so no queue time.
  m.on_finish(
      FinishReport{FinishReason::kCancelled, absl::StatusCode::kCancelled, 5, 0, 0, 0, 2.0});
  m.on_rejected(absl::StatusCode::kResourceExhausted);
}

TEST(TesseraMetricsTest, FreshExposition) {
  TesseraMetrics m;
  const std::string text = m.serialize();
  EXPECT_TRUE(contains(text, "# TYPE tessera_build_info gauge\n"));
  EXPECT_TRUE(contains(text, "tessera_build_info{build_type=\""));
  EXPECT_TRUE(contains(text, ",version=\"" TESSERA_VERSION "\"} 1\n"));
  EXPECT_TRUE(contains(text, "tessera_num_requests_running 0\n"));
  EXPECT_TRUE(contains(text, "tessera_generation_tokens_total 0\n"));
  EXPECT_TRUE(contains(text, "tessera_time_to_first_token_seconds_bucket{le=\"+Inf\"} 0\n"));
  // Nothing is made up: no KV series without an engine, no GPU memory on CPU, no model yet,
  // and no requests_total series before a request finished.
  EXPECT_FALSE(contains(text, "tessera_kv_cache_capacity_blocks{"));
  EXPECT_FALSE(contains(text, "tessera_gpu_memory"));
  EXPECT_FALSE(contains(text, "tessera_model_info"));
  EXPECT_FALSE(contains(text, "tessera_requests_total"));
  // Process metrics, read from /proc.
  const auto samples = exposition_samples(text);
  EXPECT_GT(sample(samples, "process_resident_memory_bytes").value_or(0), 1e6);
  EXPECT_GT(sample(samples, "process_open_fds").value_or(0), 2);
  EXPECT_GT(sample(samples, "process_max_fds").value_or(0), 2);
  EXPECT_GT(sample(samples, "process_start_time_seconds").value_or(0), 1.5e9);
  EXPECT_TRUE(sample(samples, "process_cpu_seconds_total").has_value());
  EXPECT_TRUE(contains(text, "# TYPE process_cpu_seconds_total counter\n"));
}

TEST(TesseraMetricsTest, EngineEventsAndScrapeTimeStats) {
  TesseraMetrics m;
  EngineStats stats;
  stats.running = 3;
  stats.waiting = 2;
  stats.kv_blocks_used = 30;
  stats.kv_blocks_total = 120;
  stats.prompt_tokens_total = 100;
  stats.generation_tokens_total = 50;
  stats.graph_steps_total = 40;
  stats.micro_batched_steps_total = 7;
  m.set_engine_stats(&stats);
  feed_workload(m);

  auto s = exposition_samples(m.serialize());
  EXPECT_EQ(sample(s, "tessera_requests_total{code=\"OK\",finish_reason=\"stop\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_requests_total{code=\"OK\",finish_reason=\"length\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_requests_total{code=\"CANCELLED\",finish_reason=\"cancelled\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_requests_total{code=\"RESOURCE_EXHAUSTED\",finish_reason=\"none\"}"),
            1);
  EXPECT_EQ(sample(s, "tessera_num_requests_running"), 3);
  EXPECT_EQ(sample(s, "tessera_num_requests_waiting"), 2);
  EXPECT_EQ(sample(s, "tessera_kv_cache_used_blocks{device=\"cpu\"}"), 30);
  EXPECT_EQ(sample(s, "tessera_kv_cache_capacity_blocks{device=\"cpu\"}"), 120);
  EXPECT_EQ(sample(s, "tessera_kv_cache_usage_ratio{device=\"cpu\"}"), 0.25);
  EXPECT_EQ(sample(s, "tessera_prompt_tokens_total"), 100);
  EXPECT_EQ(sample(s, "tessera_generation_tokens_total"), 50);
  EXPECT_EQ(sample(s, "tessera_num_preemptions_total"), 1);
  EXPECT_EQ(sample(s, "tessera_decode_graph_steps_total"), 40);
  EXPECT_EQ(sample(s, "tessera_micro_batched_steps_total"), 7);
  EXPECT_EQ(sample(s, "tessera_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(sample(s, "tessera_time_to_first_token_seconds_bucket{le=\"0.1\"}"), 0);
  EXPECT_EQ(sample(s, "tessera_time_to_first_token_seconds_bucket{le=\"0.25\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_inter_token_latency_seconds_count"), 3);
  EXPECT_EQ(sample(s, "tessera_inter_token_latency_seconds_bucket{le=\"0.03\"}"), 2);
  EXPECT_DOUBLE_EQ(sample(s, "tessera_inter_token_latency_seconds_sum").value_or(0), 0.26);
  EXPECT_EQ(sample(s, "tessera_request_queue_time_seconds_count"), 2);
  EXPECT_EQ(sample(s, "tessera_e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(sample(s, "tessera_e2e_request_latency_seconds_bucket{le=\"1\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_step_num_seqs_count"), 2);
  EXPECT_EQ(sample(s, "tessera_step_num_seqs_bucket{le=\"4\"}"), 2);
  EXPECT_EQ(sample(s, "tessera_step_num_tokens_bucket{le=\"8\"}"), 1);
  EXPECT_EQ(sample(s, "tessera_step_num_tokens_bucket{le=\"64\"}"), 2);
  EXPECT_EQ(sample(s, "tessera_step_duration_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(sample(s, "tessera_step_phase_seconds_total{phase=\"schedule\"}").value_or(0), 0.002);
  EXPECT_DOUBLE_EQ(sample(s, "tessera_step_phase_seconds_total{phase=\"launch\"}").value_or(0), 0.003);
  EXPECT_DOUBLE_EQ(
      sample(s, "tessera_step_phase_seconds_total{phase=\"overlapped\"}").value_or(0), 0.0005);
  EXPECT_DOUBLE_EQ(sample(s, "tessera_step_phase_seconds_total{phase=\"device_wait\"}").value_or(0), 0.02);
  EXPECT_DOUBLE_EQ(sample(s, "tessera_step_phase_seconds_total{phase=\"update\"}").value_or(0), 0.001);

  // The engine moves on: gauges follow, counters grow by the engine's increase.
  stats.running = 0;
  stats.kv_blocks_used = 0;
  stats.prompt_tokens_total = 150;
  stats.generation_tokens_total = 80;
  stats.graph_steps_total = 45;
  stats.micro_batched_steps_total = 9;
  s = exposition_samples(m.serialize());
  EXPECT_EQ(sample(s, "tessera_decode_graph_steps_total"), 45);
  EXPECT_EQ(sample(s, "tessera_micro_batched_steps_total"), 9);
  EXPECT_EQ(sample(s, "tessera_num_requests_running"), 0);
  EXPECT_EQ(sample(s, "tessera_kv_cache_usage_ratio{device=\"cpu\"}"), 0);
  EXPECT_EQ(sample(s, "tessera_prompt_tokens_total"), 150);
  EXPECT_EQ(sample(s, "tessera_generation_tokens_total"), 80);

  // Detached (tokens since the last scrape are still counted), then a new engine: counters go
  // on from where they were, the KV series are the new device's.
  stats.generation_tokens_total = 90;
  m.set_engine_stats(nullptr);
  s = exposition_samples(m.serialize());
  EXPECT_EQ(sample(s, "tessera_generation_tokens_total"), 90);
  EXPECT_FALSE(sample(s, "tessera_kv_cache_capacity_blocks{device=\"cpu\"}").has_value());
  EXPECT_EQ(sample(s, "tessera_num_requests_waiting"), 0);
  EngineStats next;
  next.generation_tokens_total = 7;
  next.kv_blocks_total = 10;
  m.set_engine_stats(&next, "hip:0");
  s = exposition_samples(m.serialize());
  EXPECT_EQ(sample(s, "tessera_generation_tokens_total"), 97);
  EXPECT_EQ(sample(s, "tessera_kv_cache_capacity_blocks{device=\"hip:0\"}"), 10);
  m.set_engine_stats(nullptr);
}

TEST(TesseraMetricsTest, ModelInfoAndGpuMemory) {
  TesseraMetrics m;
  m.set_model_info({"first", "llama", "q4_1", "cpu", 2048});
  m.set_model_info({"SmolLM2-135M-Instruct.Q4_1", "llama", "q4_1", "cpu", 8192, "fp8", "F8_E4M3"});
  m.set_gpu_memory("cuda:0", 1.5e9, 8e9);
  m.set_gpu_memory("cuda:1", 2e9, 8e9);
  m.set_gpu_memory("cuda:0", 3e9, 8e9);
  const std::string text = m.serialize();
  EXPECT_FALSE(contains(text, "model_id=\"first\""));
  const auto s = exposition_samples(text);
  EXPECT_EQ(sample(s,
                   "tessera_model_info{architecture=\"llama\",backend=\"cpu\",dtype=\"q4_1\","
                   "kv_cache_dtype=\"F8_E4M3\",max_model_len=\"8192\","
                   "model_id=\"SmolLM2-135M-Instruct.Q4_1\",quantization=\"fp8\"}"),
            1);
  EXPECT_EQ(sample(s, "tessera_gpu_memory_used_bytes{device=\"cuda:0\"}"), 3e9);
  EXPECT_EQ(sample(s, "tessera_gpu_memory_used_bytes{device=\"cuda:1\"}"), 2e9);
  EXPECT_EQ(sample(s, "tessera_gpu_memory_total_bytes{device=\"cuda:1\"}"), 8e9);
}

TEST(TesseraMetricsTest, EveryFamilyIsWellFormed) {
  TesseraMetrics m;
  EngineStats stats;
  m.set_engine_stats(&stats);
  m.set_model_info({"m", "llama", "f32", "cpu", 1});
  m.set_gpu_memory("cuda:0", 1, 2);
  feed_workload(m);
  for (const prometheus::MetricFamily& f : m.registry().Collect()) {
    EXPECT_TRUE(f.name.starts_with("tessera_")) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    // Only counters end in _total (promtool's lint).
    EXPECT_EQ(f.type == prometheus::MetricType::Counter, f.name.ends_with("_total")) << f.name;
    if (f.name.find("seconds") != std::string::npos || f.name.find("bytes") != std::string::npos) {
      EXPECT_TRUE(f.name.ends_with("_seconds") || f.name.ends_with("_bytes") ||
                  f.name.ends_with("_seconds_total") || f.name.ends_with("_bytes_total"))
          << f.name << ": the unit goes last";
    }
  }
  m.set_engine_stats(nullptr);
}

// promtool (Debian's prometheus package) lints the exposition after a fake workload, through
// scripts/check-metrics.sh as CI and operators run it.
TEST(TesseraMetricsTest, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (apt-get install prometheus; scripts/setup.sh does)";
  }
  TesseraMetrics m;
  EngineStats stats;
  stats.kv_blocks_total = 64;
  stats.kv_blocks_used = 5;
  stats.prompt_tokens_total = 27;
  stats.generation_tokens_total = 20;
  m.set_engine_stats(&stats);
  m.set_model_info({"we\"ird \\ model\nid \xFF", "llama", "q4_1", "cpu", 8192});
  m.set_gpu_memory("cuda:0", 1.5e9, 8e9);
  feed_workload(m);
  const std::string text = m.serialize();
  m.set_engine_stats(nullptr);

  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::filesystem::path file =
      dir / ("tessera_metrics_" + std::to_string(getpid()) + ".prom");
  const std::filesystem::path log = dir / ("tessera_metrics_" + std::to_string(getpid()) + ".log");
  std::ofstream(file) << text;
  const std::string cmd = "bash " TESSERA_SOURCE_DIR "/scripts/check-metrics.sh " + file.string() +
                          " >" + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(file);
  std::filesystem::remove(log);
  EXPECT_EQ(rc, 0) << output << "\n--- exposition ---\n" << text;
}

TEST(TesseraMetricsTest, HttpResponsesAreCountedByListenerRouteAndCode) {
  TesseraMetrics m;
  m.on_http_response("openai", "/v1/models", 200);
  m.on_http_response("openai", "/v1/models", 200);
  m.on_http_response("admin", "unmatched", 404);
  const std::string text = m.serialize();
  EXPECT_NE(text.find("# TYPE tessera_http_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("tessera_http_requests_total{code=\"200\",listener=\"openai\","
                      "route=\"/v1/models\"} 2\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tessera_http_requests_total{code=\"404\",listener=\"admin\","
                      "route=\"unmatched\"} 1\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace tessera::server
