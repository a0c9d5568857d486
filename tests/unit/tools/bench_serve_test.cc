// The load generator against an in-process mock server: loop modes, concurrency limit, token
// accounting, errors, deadlines, stopping, and the `tessera bench serve` command end to end.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/tools/metrics_stub.h"
#include "tests/unit/tools/mock_generation_server.h"
#include "tools/bench_report.h"
#include "tools/bench_runner.h"
#include "tools/bench_workload.h"
#include "tools/commands.h"
#include "tools/server_connection.h"

namespace tessera::cli {
namespace {

using testing::MockBehavior;
using testing::MockServer;

std::vector<BenchRequest> workload(size_t count, const std::string& output_len, uint64_t seed = 1) {
  WorkloadOptions o;
  o.prompt_len = *LengthDistribution::parse("uniform:4:16");
  o.output_len = *LengthDistribution::parse(output_len);
  o.count = count;
  o.vocab_size = 1000;
  o.seed = seed;
  return *build_workload(o, nullptr);
}

std::unique_ptr<ServerConnection> connect(const MockServer& server) {
  ConnectionOptions options;
  options.address = server.address();
  return *ServerConnection::open(options);
}

TEST(BenchRunner, ClosedLoopHoldsConcurrencyAndGetsEveryToken) {
  MockServer server(MockBehavior{.token_delay = std::chrono::microseconds(500)});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 4;
  options.num_requests = 40;
  BenchRunner runner(*connection, options);
  const auto requests = workload(40, "uniform:1:20");
  const RunResult result = runner.run(requests);

  ASSERT_EQ(result.records.size(), 40u);
  EXPECT_FALSE(result.stopped);
  EXPECT_GT(result.duration_seconds, 0);
  std::vector<bool> seen(40, false);
  for (const RequestRecord& r : result.records) {
    ASSERT_EQ(r.code, grpc::StatusCode::OK) << r.error;
    seen[r.workload_index] = true;
    EXPECT_EQ(r.output_tokens, requests[r.workload_index].output_len);
    EXPECT_EQ(r.expected_output_tokens, requests[r.workload_index].output_len);
    EXPECT_EQ(r.prompt_tokens, requests[r.workload_index].prompt_len);
    EXPECT_EQ(r.finish_reason, v1::FINISH_REASON_LENGTH);
    // One token per chunk: one gap fewer than tokens.
    EXPECT_EQ(r.itl_seconds.size(), static_cast<size_t>(r.output_tokens - 1));
    EXPECT_GE(r.ttft_seconds, 0);
    EXPECT_GE(r.latency_seconds, r.ttft_seconds);
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
  EXPECT_LE(server.service().max_in_flight(), 4);
  EXPECT_GE(server.service().max_in_flight(), 2);
  const RunProgress progress = runner.progress();
  EXPECT_EQ(progress.sent, 40u);
  EXPECT_EQ(progress.succeeded, 40u);
  EXPECT_EQ(progress.in_flight, 0u);
  int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.output_len;
  EXPECT_EQ(progress.output_tokens, tokens);

  const BenchReport report = make_report(result);
  EXPECT_EQ(report.succeeded, 40u);
  EXPECT_EQ(report.wrong_output_length, 0u);
}

TEST(BenchRunner, MultiTurnSendsEachTurnAfterTheLastWithTheWholeConversation) {
  // The mock answers 0, 1, 2, ... (text "t0 t1 ..."): a turn's prompt must be the previous
  // turn's prompt, that answer, and its own user part.
  for (const PromptKind kind : {PromptKind::kTokenIds, PromptKind::kWords}) {
    SCOPED_TRACE(kind == PromptKind::kWords ? "words" : "token ids");
    MockServer server(MockBehavior{.token_delay = std::chrono::microseconds(300)});
    auto connection = connect(server);
    WorkloadOptions o;
    o.kind = WorkloadKind::kMultiTurn;
    o.prompt_kind = kind;
    o.conversations = 3;
    o.turns = 4;
    o.prompt_len = *LengthDistribution::parse("uniform:2:5");
    o.output_len = *LengthDistribution::parse("uniform:2:6");
    o.vocab_size = 1000;
    o.seed = 4;
    const std::vector<BenchRequest> turns = *build_workload(
        o, [](const std::string& text) -> absl::StatusOr<int32_t> {
          return static_cast<int32_t>(std::count(text.begin(), text.end(), ' ') + 2);
        });
    RunnerOptions options;
    options.concurrency = 8;  // more than conversations: only the order of turns holds them back
    options.num_requests = turns.size();
    BenchRunner runner(*connection, options);
    const RunResult result = runner.run(turns);
    ASSERT_EQ(result.records.size(), turns.size());
    for (const RequestRecord& r : result.records) ASSERT_EQ(r.code, grpc::StatusCode::OK) << r.error;
    EXPECT_LE(server.service().max_in_flight(), 3);  // one turn per conversation at a time
    EXPECT_GE(server.service().max_in_flight(), 2);  // conversations side by side

    // The prompts each conversation sent, in the order the server got them.
    std::map<std::string, std::string> sent_text;                 // request id -> prompt
    std::map<std::string, std::vector<int32_t>> sent_ids;         // request id -> ids
    for (const v1::GenerateRequest& request : server.service().requests()) {
      sent_text[request.request_id()] = request.prompt();
      sent_ids[request.request_id()] = {request.token_ids().ids().begin(),
                                        request.token_ids().ids().end()};
    }
    ASSERT_EQ(sent_ids.size(), turns.size());
    for (size_t i = 0; i < turns.size(); ++i) {
      const BenchRequest& turn = turns[i];
      const std::string& id = turn.request.request_id();
      if (turn.turn == 0) {
        EXPECT_EQ(sent_text[id], turn.request.prompt());
        EXPECT_EQ(sent_ids[id].size(), static_cast<size_t>(turn.request.token_ids().ids_size()));
        continue;
      }
      const BenchRequest& previous = turns[i - 1];
      const std::string& prev_id = previous.request.request_id();
      if (kind == PromptKind::kTokenIds) {
        std::vector<int32_t> want = sent_ids[prev_id];
        for (int32_t k = 0; k < previous.output_len; ++k) want.push_back(k);  // the answer
        want.insert(want.end(), turn.request.token_ids().ids().begin(),
                    turn.request.token_ids().ids().end());
        EXPECT_EQ(sent_ids[id], want) << "turn " << turn.turn << " of " << turn.conversation;
        EXPECT_EQ(static_cast<int32_t>(want.size()), turn.prompt_len);
      } else {
        std::string answer;
        for (int32_t k = 0; k < previous.output_len; ++k) answer += absl::StrCat("t", k, " ");
        EXPECT_EQ(sent_text[id], sent_text[prev_id] + answer + "\n" + turn.request.prompt());
      }
    }
    // Every turn came back with the usage of its whole history.
    for (const RequestRecord& r : result.records) {
      if (kind == PromptKind::kTokenIds) {
        EXPECT_EQ(r.prompt_tokens, turns[r.workload_index].prompt_len);
      }
    }
  }
}

TEST(BenchRunner, OpenLoopSendsOnThePoissonSchedule) {
  MockServer server;
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 0;
  options.request_rate = 400;
  options.num_requests = 30;
  options.seed = 5;
  BenchRunner runner(*connection, options);
  const RunResult result = runner.run(workload(10, "4"));  // the workload is cycled

  ASSERT_EQ(result.records.size(), 30u);
  std::vector<double> starts;
  for (const RequestRecord& r : result.records) {
    ASSERT_EQ(r.code, grpc::StatusCode::OK) << r.error;
    EXPECT_EQ(r.output_tokens, 4);
    starts.push_back(r.start_seconds);
  }
  std::sort(starts.begin(), starts.end());
  // Request i is sent no earlier than its scheduled arrival (the sum of the first i+1 gaps).
  PoissonArrivals schedule(400, 5);
  double arrival = 0;
  for (double start : starts) {
    arrival += schedule.next_gap_seconds();
    EXPECT_GE(start + 1e-4, arrival);
  }
}

TEST(BenchRunner, FailuresAreCountedByCode) {
  MockServer server(MockBehavior{.fail_every = 5});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 3;
  options.num_requests = 20;
  BenchRunner runner(*connection, options);
  const BenchReport report = make_report(runner.run(workload(20, "3")));
  EXPECT_EQ(report.succeeded, 16u);
  EXPECT_EQ(report.failed, 4u);
  ASSERT_EQ(report.errors.count("RESOURCE_EXHAUSTED"), 1u);
  EXPECT_EQ(report.errors.at("RESOURCE_EXHAUSTED"), 4u);
  EXPECT_EQ(report.error_examples.at("RESOURCE_EXHAUSTED"), "queue full (limit 0)");
}

TEST(BenchRunner, ShortOutputsAreFlagged) {
  MockServer server(MockBehavior{.short_by = 1});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 2;
  options.num_requests = 6;
  BenchRunner runner(*connection, options);
  const BenchReport report = make_report(runner.run(workload(6, "5")));
  EXPECT_EQ(report.succeeded, 6u);
  EXPECT_EQ(report.wrong_output_length, 6u);
}

TEST(BenchRunner, PerRequestDeadline) {
  MockServer server(MockBehavior{.token_delay = std::chrono::milliseconds(20)});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 2;
  options.num_requests = 2;
  options.timeout_seconds = 0.05;
  BenchRunner runner(*connection, options);
  const BenchReport report = make_report(runner.run(workload(2, "100")));
  EXPECT_EQ(report.failed, 2u);
  EXPECT_EQ(report.errors.at("DEADLINE_EXCEEDED"), 2u);
}

TEST(BenchRunner, TimedRunStopsSending) {
  MockServer server(MockBehavior{.token_delay = std::chrono::milliseconds(1)});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 2;
  options.num_requests = 0;
  options.duration_seconds = 0.2;
  BenchRunner runner(*connection, options);
  const RunResult result = runner.run(workload(8, "5"));
  ASSERT_FALSE(result.records.empty());
  for (const RequestRecord& r : result.records) {
    EXPECT_EQ(r.code, grpc::StatusCode::OK) << r.error;
    EXPECT_LT(r.start_seconds, 0.2);
  }
}

TEST(BenchRunner, StopCancelsWhatIsInFlight) {
  MockServer server(MockBehavior{.token_delay = std::chrono::milliseconds(10)});
  auto connection = connect(server);
  RunnerOptions options;
  options.concurrency = 4;
  options.num_requests = 1000;
  BenchRunner runner(*connection, options);
  const auto requests = workload(4, "1000");
  std::thread stopper([&runner] {
    while (runner.progress().output_tokens < 8)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    runner.stop();
  });
  const RunResult result = runner.run(requests);
  stopper.join();
  EXPECT_TRUE(result.stopped);
  EXPECT_LT(result.records.size(), 1000u);
  ASSERT_FALSE(result.records.empty());
  for (const RequestRecord& r : result.records) EXPECT_EQ(r.code, grpc::StatusCode::CANCELLED);
}

// Whether `text` has a line that starts with `name` and ends with `value`.
bool has_line(const std::string& text, const std::string& name, const std::string& value) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, name) && absl::EndsWith(line, absl::StrCat(" ", value))) return true;
  }
  return false;
}

// argv for a command, as main() would pass it.
struct Argv {
  explicit Argv(std::vector<std::string> words) : words_(std::move(words)) {
    for (std::string& w : words_) ptrs_.push_back(w.data());
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  char** argv() { return ptrs_.data(); }
  std::vector<std::string> words_;
  std::vector<char*> ptrs_;
};

TEST(BenchServeCommand, PrintsTheTableAndWritesJson) {
  MockServer server;
  const std::string json_path = ::testing::TempDir() + "/bench_serve_test.json";
  Argv args({"serve", "--server", server.address(), "--concurrency", "8", "--num-requests", "24",
             "--prompt-len", "uniform:8:32", "--output-len", "normal:6:2", "--prompt-kind", "words",
             "--json", json_path});
  ::testing::internal::CaptureStdout();
  const int rc = bench_command(args.argc(), args.argv());
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("closed loop, concurrency 8"), std::string::npos) << out;
  EXPECT_TRUE(has_line(out, "requests ok", "24")) << out;
  EXPECT_NE(out.find("TTFT"), std::string::npos);

  std::ifstream in(json_path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["requests"]["succeeded"], 24);
  EXPECT_EQ(j["requests"]["failed"], 0);
  EXPECT_EQ(j["setup"]["model"], "mock");
  EXPECT_EQ(j["setup"]["prompt_kind"], "words");
  EXPECT_EQ(j["ttft_ms"]["count"], 24);
  std::remove(json_path.c_str());
}

TEST(BenchServeCommand, EachWorkloadRunsAndReportsTheServersCounters) {
  MockServer server;
  // The admin listener's counters move by 300 queried tokens, 120 hits and 1 preemption a scrape.
  testing::MetricsStub admin([](int served) {
    return absl::StrCat("tessera_prefix_cache_queries_total ", 300 * served, "\n",
                        "tessera_prefix_cache_hits_total ", 120 * served, "\n",
                        "tessera_num_preemptions_total ", served, "\n");
  });
  const std::string json_path = ::testing::TempDir() + "/bench_workloads_test.json";
  struct Case {
    std::vector<std::string> flags;
    int requests;
    std::string workload;
  };
  for (const Case& c : std::vector<Case>{
           {{"--workload", "shared-prefix", "--prefix-count", "2", "--prefix-len", "30",
             "--num-requests", "6"}, 6, "shared-prefix"},
           {{"--workload", "multi-turn", "--conversations", "2", "--turns", "3"}, 6, "multi-turn"},
           {{"--workload", "sharegpt", "--num-requests", "5", "--prompt-kind", "words"}, 5,
            "sharegpt"}}) {
    SCOPED_TRACE(c.workload);
    std::vector<std::string> words = {"serve", "--server", server.address(), "--concurrency", "4",
                                      "--output-len", "3", "--admin-server", admin.address(),
                                      "--json", json_path};
    if (c.workload == "sharegpt") words.erase(words.begin() + 5, words.begin() + 7);
    words.insert(words.end(), c.flags.begin(), c.flags.end());
    Argv args(words);
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    const int rc = bench_command(args.argc(), args.argv());
    const std::string out = ::testing::internal::GetCapturedStdout();
    const std::string err = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(rc, 0) << out << err;
    EXPECT_TRUE(has_line(out, "requests ok", absl::StrCat(c.requests))) << out;
    EXPECT_TRUE(has_line(out, "prefix cache hit rate", "40.0% (120 of 300 prompt tokens)")) << out;
    EXPECT_TRUE(has_line(out, "preemptions", "1")) << out;
    std::ifstream in(json_path);
    const nlohmann::json j = nlohmann::json::parse(in);
    EXPECT_EQ(j["setup"]["workload"], c.workload);
    EXPECT_EQ(j["requests"]["succeeded"], c.requests);
    EXPECT_DOUBLE_EQ(j["server"]["prefix_cache_hit_rate"].get<double>(), 0.4);
  }
  std::remove(json_path.c_str());

  // An admin listener that is not there: the run goes on, without the counters.
  Argv no_admin({"serve", "--server", server.address(), "--num-requests", "2", "--output-len",
                 "2", "--admin-server", testing::unused_address()});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(bench_command(no_admin.argc(), no_admin.argv()), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout().find("prefix cache hit rate"),
            std::string::npos);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("no server counters"),
            std::string::npos);
}

TEST(BenchServeCommand, ExitCodes) {
  MockServer failing(MockBehavior{.fail_every = 2});
  Argv some_fail(
      {"serve", "--server", failing.address(), "--num-requests", "4", "--output-len", "2"});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(bench_command(some_fail.argc(), some_fail.argv()), 3);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("RESOURCE_EXHAUSTED x2"),
            std::string::npos);

  MockServer small(MockBehavior{.max_model_len = 64});
  Argv too_long({"serve", "--server", small.address(), "--prompt-len", "60", "--output-len", "10"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(bench_command(too_long.argc(), too_long.argv()), 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("max length of 64"), std::string::npos);

  Argv nobody({"serve", "--server", testing::unused_address()});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(bench_command(nobody.argc(), nobody.argv()), 1);
  EXPECT_NE(
      ::testing::internal::GetCapturedStderr().find("cannot connect to tesserad at 127.0.0.1:"),
      std::string::npos);

  Argv bad_flag({"serve", "--concurrency", "0"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(bench_command(bad_flag.argc(), bad_flag.argv()), 2);
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace tessera::cli
