// tesserad with tensor_parallel_size on CPU ranks (the default model has 9 heads and 3 KV heads:
// 3 ranks): GetModelInfo says the split and each stage's devices, and a greedy request gets the
// one-rank server's tokens.
#include <gtest/gtest.h>

#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

TEST(TensorParallelE2E, ThreeCpuRanksServeTheOneRankTokens) {
  TESSERA_SKIP_WITHOUT_MODEL();
  const v1::GenerateRequest request = greedy_request("The capital of France is", 24, /*exact=*/true);
  std::vector<int32_t> want;
  {
    server::DaemonConfig config = test_config();
    config.backend = "cpu";
    std::unique_ptr<TestServer> one = TestServer::start(config);
    ASSERT_NE(one, nullptr);
    EXPECT_EQ(one->model_info().tensor_parallel_size(), 1);
    const UnaryResult r = generate(one->generation(), request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    want.assign(r.response.token_ids().begin(), r.response.token_ids().end());
  }
  server::DaemonConfig config = test_config();
  config.backend = "cpu";
  config.tensor_parallel_size = 3;
  std::unique_ptr<TestServer> three = TestServer::start(config);
  ASSERT_NE(three, nullptr);
  const v1::ModelInfo info = three->model_info();
  EXPECT_EQ(info.tensor_parallel_size(), 3);
  EXPECT_EQ(info.collectives(), "in-process");
  ASSERT_EQ(info.placement_size(), 1);
  EXPECT_EQ(std::vector<int32_t>(info.placement(0).ranks().begin(), info.placement(0).ranks().end()),
            (std::vector<int32_t>{0, 1, 2}));
  const UnaryResult r = generate(three->generation(), request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(std::vector<int32_t>(r.response.token_ids().begin(), r.response.token_ids().end()), want);
}

TEST(TensorParallelE2E, ARankCountThatDoesNotSplitTheModelFailsTheLoadNamingIt) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.backend = "cpu";
  config.tensor_parallel_size = 2;  // 9 heads
  std::unique_ptr<TestServer> server = TestServer::start(config, /*load=*/false);
  ASSERT_NE(server, nullptr);
  const absl::Status s = server->daemon().load_model();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor_parallel_size: 2 does not divide the model's 9 attention heads"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tessera::e2e
