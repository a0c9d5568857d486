// In-process tesserad for the e2e tests: a Daemon on 127.0.0.1 with an ephemeral port serving the
// default model, plus client helpers (unary, streaming, health, reflection, status polling).
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/daemon.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::e2e {

namespace v1 = tessera::v1;

inline const char* default_model_path() { return TESSERA_DEFAULT_MODEL; }

#define TESSERA_SKIP_WITHOUT_MODEL()                                                   \
  do {                                                                                 \
    if (!std::filesystem::exists(::tessera::e2e::default_model_path())) {              \
      GTEST_SKIP() << "default model missing: " << ::tessera::e2e::default_model_path() \
                   << " (scripts/fetch-model.sh)";                                     \
    }                                                                                  \
  } while (0)

// Small, fast settings for tests: explicit KV memory, short drain, warnings only.
server::DaemonConfig test_config();

class TestServer {
 public:
  // Starts the server; loads the model too unless `load` is false.
  static std::unique_ptr<TestServer> start(server::DaemonConfig config, bool load = true);

  server::Daemon& daemon() { return *daemon_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  v1::Generation::Stub& generation() { return *generation_; }
  v1::Admin::Stub& admin() { return *admin_; }
  std::string address() const;

  v1::ServerStatus status();
  v1::ModelInfo model_info();
  // Polls GetStatus until `done` or `timeout`; returns the last status seen.
  v1::ServerStatus wait_status(const std::function<bool(const v1::ServerStatus&)>& done,
                               std::chrono::milliseconds timeout);
  // Waits until nothing runs or waits and no KV block is in use.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  std::unique_ptr<server::Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> generation_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

// A channel to `address` that allows large messages (the server's limit is what tests probe).
std::shared_ptr<grpc::Channel> make_channel(const std::string& address);

// A greedy request with `max_tokens` (ignore_eos so the count is exact when `exact`).
v1::GenerateRequest greedy_request(const std::string& prompt, int max_tokens, bool exact = false);

struct UnaryResult {
  grpc::Status status;
  v1::GenerateResponse response;
};
UnaryResult generate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);

struct StreamResult {
  grpc::Status status;
  std::vector<v1::GenerateStreamChunk> chunks;
  std::string text;              // all chunks' text
  std::vector<int32_t> token_ids;  // all chunks' ids
  const v1::GenerateStreamChunk* last() const { return chunks.empty() ? nullptr : &chunks.back(); }
};
StreamResult generate_stream(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                             std::optional<std::chrono::milliseconds> timeout = std::nullopt);

// grpc.health.v1.Health/Check: 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN; -1 on an RPC error.
int health_check(grpc::Channel& channel, const std::string& service);
inline constexpr int kServing = 1;
inline constexpr int kNotServing = 2;

// The service names server reflection lists.
std::vector<std::string> reflection_services(grpc::Channel& channel);

// A suite whose tests share one in-process tesserad started with test_config(); each suite
// deriving from it (with itself as `Suite`) gets its own server, skipped without the model.
template <typename Suite>
class SharedServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(default_model_path())) return;
    server_ = TestServer::start(test_config()).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    TESSERA_SKIP_WITHOUT_MODEL();
    ASSERT_NE(server_, nullptr);
  }
  static inline TestServer* server_ = nullptr;
};

}  // namespace tessera::e2e
