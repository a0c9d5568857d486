// Continuous batching through the server: 256 concurrent streams with mixed prompt and output
// lengths; a short request that arrives after a long one finishes first; a KV cache too small for
// the load preempts (by recompute) and every request still gets the text it gets alone.
#include <atomic>
#include <mutex>
#include <thread>

#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model_files.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

const char* const kWords[] = {"river", "stone", "lamp", "garden", "window", "cloud", "music", "paper"};

std::string mixed_prompt(int i) {
  std::string p = absl::StrCat("Note ", i, ":");
  for (int w = 0; w < i % 6; ++w) p += std::string(" ") + kWords[(i + w) % 8];
  return p;
}

// Polls GetStatus while `running` is set and keeps the largest running_requests seen.
class RunningProbe {
 public:
  explicit RunningProbe(TestServer& server)
      : thread_([this, &server] {
          while (!stop_.load()) {
            max_running_ = std::max<int64_t>(max_running_, server.status().running_requests());
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  int64_t stop() {
    stop_ = true;
    thread_.join();
    return max_running_;
  }

 private:
  std::atomic<bool> stop_{false};
  int64_t max_running_ = 0;
  std::thread thread_;
};

TEST(BatchingE2E, TwoHundredFiftySixConcurrentStreamsCompleteWithExactTokenCounts) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.kv_cache_bytes = 512ll << 20;
  config.max_num_seqs = 256;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);

  constexpr int kClients = 256;
  std::vector<StreamResult> results(kClients);
  std::vector<int> max_tokens(kClients);
  std::vector<std::thread> clients;
  RunningProbe probe(*server);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i) {
    max_tokens[i] = 1 + (i * 7) % 8;  // 1..8
    clients.emplace_back([&, i] {
      v1::GenerateRequest r = greedy_request(mixed_prompt(i), max_tokens[i], /*exact=*/true);
      r.set_request_id(absl::StrCat("c", i));
      if (i % 3 == 1) r.mutable_sampling()->set_temperature(0.8f);  // sampled ones mixed in
      results[i] = generate_stream(server->generation(), r);
    });
  }
  for (std::thread& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t max_running = probe.stop();

  int total_tokens = 0;
  for (int i = 0; i < kClients; ++i) {
    const StreamResult& r = results[i];
    ASSERT_TRUE(r.status.ok()) << i << ": " << r.status.error_message();
    ASSERT_NE(r.last(), nullptr) << i;
    EXPECT_EQ(static_cast<int>(r.token_ids.size()), max_tokens[i]) << i;
    EXPECT_EQ(r.last()->usage().completion_tokens(), max_tokens[i]) << i;
    EXPECT_EQ(r.last()->finish_reason(), v1::FINISH_REASON_LENGTH) << i;
    EXPECT_EQ(static_cast<int>(r.chunks.size()), max_tokens[i]) << i << ": one chunk per engine step";
    EXPECT_EQ(r.last()->request_id(), absl::StrCat("c", i));
    total_tokens += max_tokens[i];
  }
  EXPECT_GT(max_running, 16) << "requests should run batched, not one after another";
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(10)));
  std::printf("256 streams: %d tokens in %.1fs, at most %lld running at once\n", total_tokens, seconds,
              static_cast<long long>(max_running));
}

TEST(BatchingE2E, ShortRequestSubmittedAfterALongOneFinishesFirst) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  constexpr int kLongTokens = 120;
  std::atomic<int> long_chunks{0};
  std::atomic<bool> long_done{false};
  grpc::Status long_status;
  grpc::ClientContext long_ctx;
  std::thread long_client([&] {
    auto reader = server->generation().GenerateStream(
        &long_ctx, greedy_request("Tell me a very long story about a dragon.", kLongTokens, true));
    v1::GenerateStreamChunk chunk;
    while (reader->Read(&chunk)) ++long_chunks;
    long_status = reader->Finish();
    long_done = true;
  });
  // The long one is running (it has produced a token) before the short one is sent.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (long_chunks.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(long_chunks.load(), 0);
  const UnaryResult short_result = generate(server->generation(), greedy_request("Hi", 3, true));
  const bool long_was_done = long_done.load();
  const int long_chunks_then = long_chunks.load();
  // The point is made; the long one need not run to its end.
  long_ctx.TryCancel();
  long_client.join();

  ASSERT_TRUE(short_result.status.ok()) << short_result.status.error_message();
  EXPECT_EQ(short_result.response.usage().completion_tokens(), 3);
  EXPECT_FALSE(long_was_done) << "the short request waited for the long one";
  EXPECT_LT(long_chunks_then, kLongTokens);
  EXPECT_EQ(long_status.error_code(), grpc::StatusCode::CANCELLED) << long_status.error_message();
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(30)));
  std::printf("short finished when the long one had %d of %d tokens\n", long_chunks_then, kLongTokens);
}

// Bytes of one 16-token KV block of the default model on the CPU backend (fp32 K and V).
int64_t kv_block_bytes() {
  auto files = ModelFiles::open(default_model_path());
  EXPECT_TRUE(files.ok()) << files.status();
  if (!files.ok()) return 0;
  const ModelConfig& c = files->config();
  const KvCacheShape one_block{static_cast<int32_t>(c.num_layers), 1, 16,
                               static_cast<int32_t>(c.num_kv_heads),
                               static_cast<int32_t>(c.head_dim)};
  return static_cast<int64_t>(one_block.bytes_per_block(DType::kF32));
}

TEST(BatchingE2E, SmallKvCachePreemptsAndEveryRequestMatchesItsSoloRun) {
  TESSERA_SKIP_WITHOUT_MODEL();
  constexpr int kBlocks = 8;
  constexpr int kRequests = 5;
  constexpr int kMaxTokens = 24;
  server::DaemonConfig config = test_config();
  config.kv_cache_bytes = kBlocks * kv_block_bytes();
  config.max_num_seqs = kRequests;
  // No admission watermark: all five run at once and outgrow the pool, so preemption (the path
  // under test) happens; the watermark's own effect is tested in KvPressure.*.
  config.admission_headroom_steps = 0;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  ASSERT_EQ(server->model_info().kv_cache_blocks(), kBlocks);

  // Each needs <= 3 blocks alone (prompt + 24 tokens <= 48); all together need ~11.
  std::vector<v1::GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(greedy_request(mixed_prompt(i + 3), kMaxTokens, true));
  }
  std::vector<UnaryResult> solo;
  for (const v1::GenerateRequest& r : requests) {
    solo.push_back(generate(server->generation(), r));
    ASSERT_TRUE(solo.back().status.ok()) << solo.back().status.error_message();
  }
  ASSERT_EQ(server->status().preemptions_total(), 0) << "one request alone fits";

  std::vector<StreamResult> together(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] { together[i] = generate_stream(server->generation(), requests[i]); });
  }
  for (std::thread& t : clients) t.join();

  const v1::ServerStatus status = server->status();
  EXPECT_GT(status.preemptions_total(), 0);
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(together[i].status.ok()) << i << ": " << together[i].status.error_message();
    EXPECT_EQ(together[i].text, solo[i].response.text()) << i;
    EXPECT_EQ(together[i].token_ids,
              std::vector<int32_t>(solo[i].response.token_ids().begin(), solo[i].response.token_ids().end()))
        << i;
    EXPECT_EQ(together[i].last()->usage().completion_tokens(), kMaxTokens);
  }
  EXPECT_TRUE(server->wait_idle(std::chrono::seconds(10)));
  std::printf("preemptions: %lld\n", static_cast<long long>(status.preemptions_total()));
}

}  // namespace
}  // namespace tessera::e2e
