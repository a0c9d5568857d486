// A model whose logits go non-finite at run time takes tesserad out of service: the default model
// with its final norm weight set to 3e38 (finite, so it passes the load-time weight check; the
// normalized hidden state then overflows fp32) is ready after loading, the first request fails
// INTERNAL naming the model fault, and from then on gRPC health is NOT_SERVING, /readyz answers 503
// with the reason, GetStatus says "faulted", and every request is UNAVAILABLE saying why.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "runtime/model_io/gguf_file.h"
#include "tests/e2e/test_server.h"
#include "tests/unit/metrics/http_test_client.h"
#include "tests/unit/runtime/planted_weights.h"

namespace tessera::e2e {
namespace {

TEST(ModelFaultE2E, NonFiniteLogitsTakeTheServerToNotServingWithTheReason) {
  TESSERA_SKIP_WITHOUT_MODEL();
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(default_model_path());
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufTensorInfo* norm = (*f)->find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  ASSERT_EQ(norm->dtype, DType::kF32);
  const std::string model = (std::filesystem::path(::testing::TempDir()) /
                             ("overflowing_" + std::to_string(::getpid()) + ".gguf"))
                                .string();
  ASSERT_EQ(testing::plant_in_gguf(default_model_path(), model, "output_norm.weight", 0,
                                   testing::float_bytes(3e38f, norm->n_elements)),
            "");
  server::DaemonConfig config = test_config();
  config.model = model;
  auto server = TestServer::start(config);
  std::filesystem::remove(model);
  ASSERT_NE(server, nullptr);
  const int admin = server->daemon().admin_port();
  std::optional<testing::HttpReply> ready = testing::http_request(admin, "GET", "/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 200);
  EXPECT_EQ(health_check(*server->channel(), ""), kServing);

  const UnaryResult hit = generate(server->generation(), greedy_request("Hello there", 4));
  EXPECT_EQ(hit.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(hit.status.error_message().find("model fault on this request: sampling gave token "
                                            "id -1: the model's logits are not finite"),
            std::string::npos)
      << hit.status.error_message();

  // The engine tells the daemon on its thread right after failing the request.
  const v1::ServerStatus status =
      server->wait_status([](const v1::ServerStatus& s) { return s.state() == "faulted"; },
                          std::chrono::seconds(10));
  EXPECT_EQ(status.state(), "faulted");
  EXPECT_EQ(health_check(*server->channel(), ""), kNotServing);
  EXPECT_EQ(health_check(*server->channel(), "tessera.v1.Generation"), kNotServing);
  ready = testing::http_request(admin, "GET", "/readyz");
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("model fault: sampling gave token id -1"), std::string::npos)
      << ready->body;
  // The OpenAI API's /health says why too.
  std::optional<testing::HttpReply> health =
      testing::http_request(server->daemon().openai_port(), "GET", "/health");
  ASSERT_TRUE(health.has_value());
  EXPECT_EQ(health->status, 503);
  EXPECT_NE(health->body.find("not serving: faulted: model fault: sampling gave token id -1"),
            std::string::npos)
      << health->body;

  const UnaryResult later = generate(server->generation(), greedy_request("Hello again", 4));
  EXPECT_EQ(later.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(later.status.error_message().find("model fault: sampling gave token id -1"),
            std::string::npos)
      << later.status.error_message();
}

// A request's own extreme sampling settings are not a model fault: a repetition penalty of 1e-38
// (which once divided a positive logit into +inf, faulting the whole server) gets its tokens, and
// the next request is served.
TEST(ModelFaultE2E, ExtremePenaltiesAreNotAModelFault) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  v1::GenerateRequest extreme = greedy_request("Hello hello hello", 8, /*exact=*/true);
  extreme.mutable_sampling()->set_repetition_penalty(1e-38f);
  extreme.mutable_sampling()->set_frequency_penalty(2.0f);
  const UnaryResult r = generate(server->generation(), extreme);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.token_ids_size(), 8);
  const UnaryResult next = generate(server->generation(), greedy_request("The capital of France is", 4));
  EXPECT_TRUE(next.status.ok()) << next.status.error_message();
  EXPECT_EQ(server->status().state(), "serving");
}

}  // namespace
}  // namespace tessera::e2e
