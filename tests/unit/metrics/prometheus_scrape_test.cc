// A real Prometheus server (Debian's prometheus package) scrapes the admin listener on loopback
// while a fake engine reports, and its HTTP API then answers for the generation token counter
// and the TTFT histogram: the exposition is not only lint-clean but ingested. Skipped where the
// prometheus binary is missing.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <thread>

#include "server/http/http_server.h"
#include "server/http/admin_routes.h"
#include "server/metrics/readiness_state.h"
#include "server/metrics/tessera_metrics.h"
#include "tests/unit/metrics/prometheus_process.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;
using testing::free_port;
using testing::PrometheusProcess;
using testing::query_value;

TEST(PrometheusScrapeTest, PrometheusIngestsTheExposition) {
  if (!testing::prometheus_installed()) {
    GTEST_SKIP() << "prometheus not installed (apt-get install prometheus; scripts/setup.sh does)";
  }
  TesseraMetrics metrics;
  ReadinessState readiness;
  EngineStats stats;
  stats.kv_blocks_total = 100;
  metrics.set_engine_stats(&stats);
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  HttpServer admin(options);
  ASSERT_TRUE(add_admin_routes(admin, readiness, [&] { return metrics.serialize(); }).ok());
  ASSERT_TRUE(admin.start().ok());

  PrometheusProcess prometheus;
  const int web_port = free_port();
  ASSERT_TRUE(prometheus.start(admin.port(), web_port));

  // A short load while Prometheus scrapes every second: tokens, first tokens, steps.
  const auto until = std::chrono::steady_clock::now() + 30s;
  std::optional<double> tokens, ttft_count, p50;
  int64_t generated = 0;
  while (std::chrono::steady_clock::now() < until) {
    for (int i = 0; i < 5; ++i) {
      metrics.on_first_token(0.05 + 0.01 * i);  // 50..90 ms
      for (int t = 0; t < 8; ++t) metrics.on_inter_token(0.02);
      generated += 9;
    }
    stats.generation_tokens_total = generated;
    std::this_thread::sleep_for(200ms);
    tokens = query_value(web_port, "tessera_generation_tokens_total{job=\"tessera\"}");
    ttft_count = query_value(web_port, "tessera_time_to_first_token_seconds_count");
    p50 = query_value(web_port,
                      "histogram_quantile(0.5, tessera_time_to_first_token_seconds_bucket)");
    if (tokens && *tokens > 0 && ttft_count && *ttft_count > 0 && p50) break;
  }
  ASSERT_TRUE(tokens.has_value()) << "Prometheus never had tessera_generation_tokens_total\n"
                                  << prometheus.log();
  EXPECT_GT(*tokens, 0);
  EXPECT_LE(*tokens, static_cast<double>(generated));
  ASSERT_TRUE(ttft_count.has_value());
  EXPECT_GT(*ttft_count, 0);
  ASSERT_TRUE(p50.has_value());
  // Every first token was 50 to 90 ms: the median lies in the (0.04, 0.1] buckets.
  EXPECT_GT(*p50, 0.04);
  EXPECT_LE(*p50, 0.1);
  // The scrape itself is healthy.
  EXPECT_EQ(query_value(web_port, "up{job=\"tessera\"}"), 1.0);
  admin.stop();
  metrics.set_engine_stats(nullptr);
}

}  // namespace
}  // namespace tessera::server
