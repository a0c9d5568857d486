// Cancellation, deadlines and admission limits: streams cancelled midway and calls past their
// deadline give their KV blocks back; a full queue answers RESOURCE_EXHAUSTED at once.
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

TEST(CancellationE2E, HundredStreamsCancelledMidwayReturnEveryKvBlock) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  constexpr int kStreams = 100;
  constexpr int kMaxTokens = 500;
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<int> tokens_before_cancel(kStreams, 0);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (int i = 0; i < kStreams; ++i) contexts.push_back(std::make_unique<grpc::ClientContext>());
  std::atomic<int> midway{0};
  std::atomic<bool> cancel_now{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      auto reader = server->generation().GenerateStream(
          contexts[i].get(), greedy_request(absl::StrCat("Story number ", i, ":"), kMaxTokens, true));
      v1::GenerateStreamChunk chunk;
      bool counted = false;
      while (reader->Read(&chunk)) {
        if (counted) continue;
        tokens_before_cancel[i] += chunk.token_ids_size();
        if (tokens_before_cancel[i] >= 2) {
          counted = true;
          ++midway;
          while (!cancel_now.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          contexts[i]->TryCancel();
        }
      }
      statuses[i] = reader->Finish();
    });
  }
  // Every stream is generating (2+ tokens each) and holds blocks; then all are cancelled.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (midway.load() < kStreams && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const v1::ServerStatus before = server->status();
  cancel_now = true;
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(midway.load(), kStreams);
  EXPECT_GT(before.kv_cache_blocks_used(), 0);
  EXPECT_EQ(before.running_requests(), kStreams);

  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(statuses[i].error_code(), grpc::StatusCode::CANCELLED) << i << ": " << statuses[i].error_message();
    EXPECT_LT(tokens_before_cancel[i], kMaxTokens);
  }
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(30)));
  const v1::ServerStatus after = server->status();
  EXPECT_EQ(after.kv_cache_blocks_used(), 0);
  EXPECT_EQ(after.running_requests(), 0);
  std::printf("blocks in use: %lld before the cancel, %lld after\n",
              static_cast<long long>(before.kv_cache_blocks_used()),
              static_cast<long long>(after.kv_cache_blocks_used()));

  // The server goes on serving.
  const UnaryResult after_cancel = generate(server->generation(), greedy_request("Hello", 3, true));
  ASSERT_TRUE(after_cancel.status.ok()) << after_cancel.status.error_message();
  EXPECT_EQ(after_cancel.response.usage().completion_tokens(), 3);
}

TEST(CancellationE2E, DeadlineShorterThanTheGenerationEndsWithDeadlineExceededAndFreesBlocks) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  // 1000 tokens take tens of seconds here; the deadline is one second.
  const v1::GenerateRequest request = greedy_request("Write a long essay about rivers.", 1000, true);

  const auto t0 = std::chrono::steady_clock::now();
  const UnaryResult unary = generate(server->generation(), request, std::chrono::milliseconds(1000));
  EXPECT_EQ(unary.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << unary.status.error_message();
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(10))) << "the engine went on after the deadline";

  const StreamResult stream = generate_stream(server->generation(), request, std::chrono::milliseconds(1500));
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << stream.status.error_message();
  EXPECT_LT(stream.token_ids.size(), 1000u);
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(10))) << "the engine went on after the deadline";
  EXPECT_EQ(server->status().kv_cache_blocks_used(), 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("both deadline calls ended and freed their blocks in %.1fs (%zu tokens streamed)\n",
              seconds, stream.token_ids.size());
}

TEST(CancellationE2E, FullQueueAnswersResourceExhaustedNamingTheLimit) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.max_num_seqs = 1;
  config.max_queue = 2;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);

  constexpr int kHolders = 3;  // one running, two queued
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::Status> statuses(kHolders);
  std::atomic<int> first_chunks{0};
  std::vector<std::thread> holders;
  for (int i = 0; i < kHolders; ++i) contexts.push_back(std::make_unique<grpc::ClientContext>());
  auto hold = [&](int i) {
    auto reader = server->generation().GenerateStream(contexts[i].get(),
                                                      greedy_request("Count to a thousand:", 1000, true));
    v1::GenerateStreamChunk chunk;
    bool first = true;
    while (reader->Read(&chunk)) {
      if (first) ++first_chunks;
      first = false;
    }
    statuses[i] = reader->Finish();
  };
  holders.emplace_back(hold, 0);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (first_chunks.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(first_chunks.load(), 1);
  holders.emplace_back(hold, 1);
  holders.emplace_back(hold, 2);
  const v1::ServerStatus queued = server->wait_status(
      [](const v1::ServerStatus& s) { return s.waiting_requests() == 2; }, std::chrono::seconds(60));
  ASSERT_EQ(queued.waiting_requests(), 2);
  ASSERT_EQ(queued.running_requests(), 1);

  const UnaryResult rejected = generate(server->generation(), greedy_request("One more", 4));
  EXPECT_EQ(rejected.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(rejected.status.error_message().find("queue"), std::string::npos) << rejected.status.error_message();
  EXPECT_NE(rejected.status.error_message().find("2"), std::string::npos) << rejected.status.error_message();
  const StreamResult rejected_stream = generate_stream(server->generation(), greedy_request("One more", 4));
  EXPECT_EQ(rejected_stream.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(rejected_stream.chunks.empty());

  for (auto& ctx : contexts) ctx->TryCancel();
  for (std::thread& t : holders) t.join();
  for (const grpc::Status& s : statuses) EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(30)));
}

}  // namespace
}  // namespace tessera::e2e
