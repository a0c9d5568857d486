// `tessera bench serve` runs each workload against tesserad on the default model: every request
// comes back whole, and the report carries the server's prefix-cache counters from the admin
// listener. Kept to a few seconds on the CPU: short prompts and answers, and a context of 64
// tokens that ShareGPT's lengths are drawn within.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

// Runs the CLI's bench serve with `flags` against `server`; the JSON it wrote, or null.
nlohmann::json bench(TestServer& server, const std::string& flags) {
  const std::string json_path = ::testing::TempDir() + "/bench_workloads_e2e.json";
  std::remove(json_path.c_str());
  const std::string command =
      absl::StrCat(TESSERA_CLI, " bench serve --server ", server.address(), " --admin-server ",
                   "127.0.0.1:", server.daemon().admin_port(), " --json ", json_path, " ", flags,
                   " >/dev/null 2>&1");
  const int rc = std::system(command.c_str());
  EXPECT_EQ(rc, 0) << command;
  std::ifstream in(json_path);
  if (!in) return nullptr;
  return nlohmann::json::parse(in);
}

void expect_all_served(const nlohmann::json& j, int requests) {
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["requests"]["succeeded"], requests);
  EXPECT_EQ(j["requests"]["failed"], 0);
  EXPECT_EQ(j["requests"]["wrong_output_length"], 0);
  EXPECT_EQ(j["ttft_ms"]["count"], requests);
  EXPECT_GT(j["itl_ms"]["count"].get<int>(), 0);
  EXPECT_GT(j["throughput"]["output_tokens_per_s"].get<double>(), 0);
  ASSERT_TRUE(j["server"].is_object()) << j.dump(2);
  EXPECT_GT(j["server"]["prefix_cache_query_tokens"].get<double>(), 0);
}

class BenchWorkloadsE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(default_model_path()) || !std::filesystem::exists(TESSERA_CLI)) {
      return;
    }
    server::DaemonConfig config = test_config();
    config.max_model_len = 64;
    server_ = TestServer::start(config).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    TESSERA_SKIP_WITHOUT_MODEL();
    if (!std::filesystem::exists(TESSERA_CLI)) GTEST_SKIP() << "tessera CLI not built";
    ASSERT_NE(server_, nullptr);
  }
  static TestServer* server_;
};

TestServer* BenchWorkloadsE2E::server_ = nullptr;

TEST_F(BenchWorkloadsE2E, SharedPrefixRequestsHitTheCache) {
  // 2 system prompts of 32 tokens (2 blocks), 6 requests, 2 at a time: the 4 after the first of
  // each group find it cached (the first two run side by side, before either is cached).
  const nlohmann::json j = bench(*server_, "--workload shared-prefix --prefix-count 2 "
                                           "--prefix-len 32 --prompt-len 8 --output-len 4 "
                                           "--num-requests 6 --concurrency 2 --seed 11");
  expect_all_served(j, 6);
  EXPECT_EQ(j["setup"]["workload"], "shared-prefix");
  EXPECT_GE(j["server"]["prefix_cache_hit_tokens"].get<double>(), 4 * 32);
  EXPECT_GT(j["server"]["prefix_cache_hit_rate"].get<double>(), 0.5);
}

TEST_F(BenchWorkloadsE2E, MultiTurnConversationsFindTheirHistoryCached) {
  // 2 conversations of 3 turns: a later turn's prompt starts with the whole earlier turn, whose
  // full blocks were cached as it ran.
  const nlohmann::json j = bench(*server_, "--workload multi-turn --conversations 2 --turns 3 "
                                           "--prompt-len 12 --output-len 6 --concurrency 2 "
                                           "--seed 12");
  expect_all_served(j, 6);
  EXPECT_EQ(j["setup"]["workload"], "multi-turn");
  EXPECT_GT(j["server"]["prefix_cache_hit_tokens"].get<double>(), 0);
  // Each turn sent its history: 12, then 12 + 6 + 12, then 30 + 6 + 12 tokens, per conversation.
  EXPECT_EQ(j["input_tokens"].get<int>(), 2 * (12 + 30 + 48));
}

TEST_F(BenchWorkloadsE2E, ShareGptLengthsFitTheContext) {
  const nlohmann::json j = bench(*server_, "--workload sharegpt --num-requests 3 "
                                           "--concurrency 3 --seed 13");
  expect_all_served(j, 3);
  EXPECT_EQ(j["setup"]["workload"], "sharegpt");
  // Drawn within the 64-token context: 3 requests of at most 64 tokens each.
  EXPECT_LE(j["input_tokens"].get<int>() + j["output_tokens"].get<int>(), 3 * 64);
}

}  // namespace
}  // namespace tessera::e2e
