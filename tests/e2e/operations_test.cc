// Operating tesserad: the admin listener's readiness through loading -> ready -> draining, a live
// /metrics that promtool accepts, and a real Prometheus scraping the daemon during a short load,
// queried for the generation token counter and the TTFT histogram.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/e2e/test_server.h"
#include "tests/unit/metrics/prometheus_process.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;

tessera::testing::HttpReply admin_get(int port, const std::string& path) {
  tessera::testing::HttpTestClient client(port);
  EXPECT_TRUE(client.connected());
  client.send("GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  client.closed_within(5s);
  std::optional<tessera::testing::HttpReply> reply = client.read_reply(100ms);
  return reply.value_or(tessera::testing::HttpReply{});
}

TEST(OperationsE2E, ReadinessFollowsLoadingServingDraining) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config(), /*load=*/false);
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(admin_get(port, "/healthz").status, 200);
  tessera::testing::HttpReply loading = admin_get(port, "/readyz");
  EXPECT_EQ(loading.status, 503);
  EXPECT_NE(loading.body.find("loading"), std::string::npos) << loading.body;

  ASSERT_TRUE(server->daemon().load_model().ok());
  EXPECT_EQ(admin_get(port, "/readyz").status, 200);

  std::thread drain([&] { server->daemon().drain(); });
  tessera::testing::HttpReply draining;
  for (int i = 0; i < 200 && draining.status != 503; ++i) {
    draining = admin_get(port, "/readyz");
    if (draining.status != 503) std::this_thread::sleep_for(5ms);
  }
  drain.join();
  EXPECT_EQ(draining.status, 503);
  EXPECT_NE(draining.body.find("draining"), std::string::npos) << draining.body;
}

TEST(OperationsE2E, LiveMetricsPassPromtoolAndPrometheusScrapesThem) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(generate(server->generation(), greedy_request("Hello there", 8)).status.ok());
  }
  const tessera::testing::HttpReply scrape = admin_get(port, "/metrics");
  ASSERT_EQ(scrape.status, 200);
  for (const char* name : {"tessera_generation_tokens_total", "tessera_time_to_first_token_seconds_bucket",
                           "tessera_num_requests_running", "tessera_kv_cache_usage_ratio",
                           "process_resident_memory_bytes"}) {
    EXPECT_NE(scrape.body.find(name), std::string::npos) << name;
  }
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const std::string file = ::testing::TempDir() + "/tessera_metrics.txt";
    std::ofstream(file) << scrape.body;
    const std::string check = std::string(TESSERA_SOURCE_DIR) + "/scripts/check-metrics.sh " + file;
    EXPECT_EQ(std::system(check.c_str()), 0) << "promtool rejected the exposition";
  }

  if (!testing::prometheus_installed()) GTEST_SKIP() << "prometheus not installed (scripts/setup.sh does)";
  tessera::testing::PrometheusProcess prometheus;
  const int web_port = tessera::testing::free_port();
  ASSERT_TRUE(prometheus.start(port, web_port));
  std::optional<double> tokens, ttft_count;
  const auto until = std::chrono::steady_clock::now() + 40s;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(generate(server->generation(), greedy_request("Count to five:", 6)).status.ok());
    tokens = tessera::testing::query_value(web_port, "tessera_generation_tokens_total{job=\"tessera\"}");
    ttft_count = tessera::testing::query_value(web_port, "tessera_time_to_first_token_seconds_count");
    if (tokens && *tokens >= 24 && ttft_count && *ttft_count >= 4) break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(tokens.has_value()) << prometheus.log();
  EXPECT_GE(*tokens, 24);  // at least the three warm-up requests' 8 tokens each
  ASSERT_TRUE(ttft_count.has_value()) << prometheus.log();
  EXPECT_GE(*ttft_count, 4);
}

}  // namespace
}  // namespace tessera::e2e
