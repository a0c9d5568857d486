// The load generator behind `tessera bench serve`: sends GenerateStream calls (or, with
// Api::kOpenAi, streamed /v1/completions requests to the OpenAI port) from a workload,
// closed loop (at most `concurrency` in flight, the next one sent when one finishes) or open
// loop (Poisson arrivals at `request_rate`, optionally capped by `concurrency`), and records
// when each call's chunks arrive. gRPC calls run on the gRPC callback API: the dispatcher is the
// calling thread and the reactors run on gRPC's own few threads, whatever the concurrency;
// OpenAI calls run a blocking HTTP client on a thread each.
//
// A multi-turn workload (requests with a conversation) is sent turn by turn: a turn goes out
// once the one before it in its conversation has finished, its prompt the conversation so far
// -- the previous turn's prompt and the answer the server streamed (token ids, or text for word
// prompts) -- followed by its own user part; conversations run side by side, each turn taking a
// slot of the concurrency (or an arrival of the open loop) like any request. Each turn is sent
// once: such a workload is not cycled through.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grpcpp/support/status.h"
#include "tessera/v1/tessera.grpc.pb.h"
#include "tools/bench_workload.h"
#include "tools/server_connection.h"

namespace tessera::cli {

enum class Api { kGrpc, kOpenAi };

struct RunnerOptions {
  Api api = Api::kGrpc;
  std::string openai_address;  // HOST:PORT of the OpenAI port (Api::kOpenAi)
  std::string api_key;         // sent as "Authorization: Bearer" on the OpenAI port; empty = none
  int32_t concurrency = 1;  // most calls in flight; 0 = no limit (open loop only)
  double request_rate = std::numeric_limits<double>::infinity();  // per second; inf = closed loop
  size_t num_requests = 0;      // calls to send; 0 = until duration_seconds
  double duration_seconds = 0;  // stop sending after this long (running calls finish); 0 = none
  double timeout_seconds = 0;   // deadline of each call; 0 = none
  uint64_t seed = 0;            // of the arrival process
};

// What one call did. Times are in seconds.
struct RequestRecord {
  size_t workload_index = 0;
  int32_t expected_output_tokens = 0;  // the request's max_tokens (ignore_eos: exact)
  double start_seconds = 0;            // since the run started
  double ttft_seconds = -1;            // to the first chunk carrying tokens; -1: none came
  double latency_seconds = 0;          // to the end of the call
  std::vector<double> itl_seconds;     // between successive chunks carrying tokens
  int32_t output_tokens = 0;           // counted over the chunks
  int32_t prompt_tokens = 0;           // the final chunk's usage
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string error;  // the status message when code != OK
  // What was generated, kept for a turn of a conversation only (the next turn's history).
  std::vector<int32_t> output_ids;
  std::string output_text;
};

struct RunResult {
  std::vector<RequestRecord> records;  // in completion order
  double duration_seconds = 0;         // first send to last completion
  bool stopped = false;                // stop() was called
};

struct RunProgress {
  size_t sent = 0;
  size_t succeeded = 0;
  size_t failed = 0;
  size_t in_flight = 0;
  int64_t output_tokens = 0;
  double elapsed_seconds = 0;
};

class BenchRunner {
 public:
  // `connection` must outlive the runner.
  BenchRunner(ServerConnection& connection, RunnerOptions options);
  ~BenchRunner();

  // Sends calls built from `workload` (in order, from the start again when it runs out) until
  // num_requests were sent or duration_seconds passed, then waits for every call to end.
  // `workload` must not be empty. Call once.
  RunResult run(const std::vector<BenchRequest>& workload);

  // Thread-safe; cheap enough to poll for a progress bar.
  RunProgress progress() const;

  // From any thread: send nothing more and cancel the calls in flight; run() then returns.
  void stop();

 private:
  class Call;
  class GrpcCall;
  class OpenAiCall;
  using Clock = std::chrono::steady_clock;

  // A conversation's state while a multi-turn workload runs.
  struct Conversation {
    int32_t finished_turns = 0;
    std::vector<int32_t> history_ids;  // the last turn's prompt and answer
    std::string history_text;
    const v1::GenerateRequest* last_sent = nullptr;
  };

  void finish(Call* call, RequestRecord record);
  // Under mu_: the first turn not yet sent whose conversation is ready for it.
  std::optional<size_t> next_turn() const;
  // Under mu_: the request a turn sends, its history prepended (kept in built_).
  const v1::GenerateRequest& build_turn(size_t index);

  ServerConnection& connection_;
  const RunnerOptions options_;
  Clock::time_point start_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::unordered_map<Call*, std::shared_ptr<Call>> in_flight_;
  std::vector<RequestRecord> records_;
  const std::vector<BenchRequest>* workload_ = nullptr;  // during run()
  std::vector<Conversation> conversations_;  // multi-turn workloads only
  std::vector<bool> sent_turns_;             // [workload index], multi-turn workloads only
  std::deque<v1::GenerateRequest> built_;    // the turns' requests, alive until run() returns
  Clock::time_point last_done_;

  std::atomic<bool> started_{false};
  std::atomic<size_t> sent_{0};
  std::atomic<size_t> succeeded_{0};
  std::atomic<size_t> failed_{0};
  std::atomic<int64_t> output_tokens_{0};
};

}  // namespace tessera::cli
