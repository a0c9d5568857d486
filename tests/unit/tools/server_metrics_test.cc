// Reading tesserad's counters from the admin listener: the Prometheus text parsed, the
// differences over a run, and the scrape over HTTP.
#include "tools/server_metrics.h"

#include "gtest/gtest.h"
#include "tests/unit/tools/metrics_stub.h"
#include "tests/unit/tools/mock_generation_server.h"

namespace tessera::cli {
namespace {

TEST(ServerMetrics, ParsesNamesValuesAndSumsLabelSets) {
  const auto m = parse_prometheus_text(
      "# HELP tessera_prefix_cache_hits_total Prompt tokens found in the prefix cache.\n"
      "# TYPE tessera_prefix_cache_hits_total counter\n"
      "tessera_prefix_cache_hits_total 120\n"
      "tessera_http_requests_total{route=\"/v1/completions\",code=\"200\"} 3\n"
      "tessera_http_requests_total{route=\"/a b\",code=\"404\"} 2 1700000000\n"
      "  process_cpu_seconds_total 1.5e+01  \n"
      "broken_line\n"
      "bad_value{x=\"1\"} nope\n");
  EXPECT_DOUBLE_EQ(m.at("tessera_prefix_cache_hits_total"), 120);
  EXPECT_DOUBLE_EQ(m.at("tessera_http_requests_total"), 5);
  EXPECT_DOUBLE_EQ(m.at("tessera_http_requests_total{route=\"/a b\",code=\"404\"}"), 2);
  EXPECT_DOUBLE_EQ(m.at("process_cpu_seconds_total"), 15);
  EXPECT_EQ(m.count("broken_line"), 0u);
  EXPECT_EQ(m.count("bad_value"), 0u);
}

TEST(ServerMetrics, TheRunsDeltaAndHitRate) {
  const std::map<std::string, double> before = {{"tessera_prefix_cache_queries_total", 100},
                                                {"tessera_prefix_cache_hits_total", 10},
                                                {"tessera_num_preemptions_total", 2}};
  const std::map<std::string, double> after = {{"tessera_prefix_cache_queries_total", 500},
                                               {"tessera_prefix_cache_hits_total", 310},
                                               {"tessera_num_preemptions_total", 9}};
  const ServerDelta d = server_delta(before, after);
  EXPECT_DOUBLE_EQ(d.prefix_cache_queries, 400);
  EXPECT_DOUBLE_EQ(d.prefix_cache_hits, 300);
  EXPECT_DOUBLE_EQ(d.preemptions, 7);
  EXPECT_DOUBLE_EQ(*d.prefix_cache_hit_rate(), 0.75);
  EXPECT_FALSE(server_delta(before, before).prefix_cache_hit_rate().has_value());
  EXPECT_DOUBLE_EQ(server_delta({}, after).prefix_cache_queries, 500);  // a counter first seen
}

TEST(ServerMetrics, TheRunsStepProfileByPhase) {
  const auto before = parse_prometheus_text(
      "tessera_step_duration_seconds_count 10\n"
      "tessera_step_duration_seconds_sum 0.5\n"
      "tessera_step_num_seqs_sum 40\n"
      "tessera_step_num_tokens_sum 80\n"
      "tessera_step_phase_seconds_total{phase=\"schedule\"} 0.01\n"
      "tessera_step_phase_seconds_total{phase=\"launch\"} 0.1\n"
      "tessera_step_phase_seconds_total{phase=\"overlapped\"} 0.02\n"
      "tessera_step_phase_seconds_total{phase=\"device_wait\"} 0.3\n"
      "tessera_step_phase_seconds_total{phase=\"update\"} 0.05\n");
  const auto after = parse_prometheus_text(
      "tessera_step_duration_seconds_count 110\n"
      "tessera_step_duration_seconds_sum 2.5\n"
      "tessera_step_num_seqs_sum 840\n"
      "tessera_step_num_tokens_sum 1680\n"
      "tessera_step_phase_seconds_total{phase=\"schedule\"} 0.06\n"
      "tessera_step_phase_seconds_total{phase=\"launch\"} 0.6\n"
      "tessera_step_phase_seconds_total{phase=\"overlapped\"} 0.07\n"
      "tessera_step_phase_seconds_total{phase=\"device_wait\"} 1.7\n"
      "tessera_step_phase_seconds_total{phase=\"update\"} 0.15\n");
  const ServerDelta d = server_delta(before, after);
  EXPECT_DOUBLE_EQ(d.steps, 100);
  EXPECT_DOUBLE_EQ(d.step_seqs, 800);
  EXPECT_DOUBLE_EQ(d.step_tokens, 1600);
  EXPECT_DOUBLE_EQ(d.step_seconds, 2.0);
  EXPECT_DOUBLE_EQ(d.schedule_seconds, 0.05);
  EXPECT_DOUBLE_EQ(d.launch_seconds, 0.5);
  EXPECT_DOUBLE_EQ(d.overlapped_seconds, 0.05);
  EXPECT_DOUBLE_EQ(d.device_wait_seconds, 1.4);
  EXPECT_DOUBLE_EQ(d.update_seconds, 0.1);
}

TEST(ServerMetrics, ScrapesTheAdminListener) {
  testing::MetricsStub stub([](int served) {
    return absl::StrCat("tessera_num_preemptions_total ", served * 3, "\n");
  });
  auto first = scrape_metrics(stub.address());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_DOUBLE_EQ(first->at("tessera_num_preemptions_total"), 0);
  EXPECT_EQ(stub.last_request_line(), "GET /metrics HTTP/1.1");
  auto second = scrape_metrics(stub.address());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_DOUBLE_EQ(second->at("tessera_num_preemptions_total"), 3);

  auto nobody = scrape_metrics(testing::unused_address());
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(scrape_metrics("no-port").ok());
}

}  // namespace
}  // namespace tessera::cli
