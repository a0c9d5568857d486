// The results of `tessera bench serve`: metrics computed from the per-request records, in the
// terms of vLLM's benchmark_serving (TTFT, ITL per chunk arrival, TPOT, end-to-end latency,
// request and token throughput), printed as a table and written as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "nlohmann/json.hpp"
#include "tools/bench_runner.h"
#include "tools/percentiles.h"
#include "tools/server_metrics.h"

namespace tessera::cli {

// How the run was set up, echoed in the report.
struct BenchSetup {
  std::string server;
  std::string model;
  std::string mode;  // e.g. "closed loop, concurrency 8" or "open loop, 4 req/s (Poisson)"
  int32_t concurrency = 0;
  double request_rate = 0;  // inf for closed loop
  std::string prompt_len;   // distribution specs
  std::string output_len;
  std::string prompt_kind;  // "token-ids" or "words"
  uint64_t seed = 0;
  std::string workload = "random";  // bench_workload.h's names
  // The workload's own parameters ({"prefix_count": 4, ...}); empty for random.
  nlohmann::ordered_json workload_params = nlohmann::ordered_json::object();
};

struct BenchReport {
  size_t succeeded = 0;
  size_t failed = 0;
  std::map<std::string, size_t> errors;               // status code name -> count
  std::map<std::string, std::string> error_examples;  // status code name -> first message
  size_t wrong_output_length = 0;  // succeeded, but output tokens != the requested max_tokens
  bool stopped = false;            // interrupted before the planned end

  double duration_seconds = 0;
  int64_t input_tokens = 0;            // prompt tokens of succeeded requests (the server's usage)
  int64_t output_tokens = 0;           // tokens received by succeeded requests
  double request_throughput = 0;       // succeeded requests per second
  double input_token_throughput = 0;   // per second
  double output_token_throughput = 0;  // per second
  double total_token_throughput = 0;   // per second

  // Seconds, over succeeded requests (ITL: over every gap between chunks with tokens; TPOT:
  // per request, (latency - TTFT) / (output tokens - 1), for requests of 2 tokens or more).
  Summary ttft;
  Summary itl;
  Summary tpot;
  Summary e2e_latency;

  // What the server's counters moved by during the run (--admin-server); nullopt when unread.
  std::optional<ServerDelta> server;
};

BenchReport make_report(const RunResult& run);

// The end-of-run table: counts, throughputs, the server's prefix-cache hit rate and preemptions
// when read, and mean/p50/p90/p99/max of each latency in ms.
std::string render_report(const BenchSetup& setup, const BenchReport& report);

// The same as JSON: {"setup": {...}, "requests": {...}, "throughput": {...}, "server": {...} or
// null, "ttft_ms": {...}, ...}.
nlohmann::ordered_json report_json(const BenchSetup& setup, const BenchReport& report);

}  // namespace tessera::cli
