// The flags of `tessera bench serve`, parsed and checked.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "tools/bench_runner.h"
#include "tools/bench_workload.h"
#include "tools/cli_args.h"
#include "tools/length_distribution.h"
#include "tools/server_connection.h"

namespace tessera::cli {

struct BenchServeOptions {
  ConnectionOptions connection;
  std::string model;
  RunnerOptions runner;
  LengthDistribution prompt_len = LengthDistribution::fixed(128);
  LengthDistribution output_len = LengthDistribution::fixed(128);
  PromptKind prompt_kind = PromptKind::kTokenIds;
  uint64_t seed = 0;
  std::string json_path;     // --json FILE; empty = none
  size_t workload_size = 0;  // distinct requests synthesized (a timed run cycles through them)
};

// --model --concurrency --request-rate --num-requests --duration --prompt-len --output-len
// --prompt-kind --seed --json --timeout (and the connection flags)
const std::set<std::string>& bench_serve_value_flags();
const char* bench_serve_usage();

// Mode: --concurrency N alone is a closed loop; --request-rate R is an open loop (Poisson), capped
// at N in flight when --concurrency is given too; neither means --concurrency 1. Without
// --num-requests and --duration, 100 requests are sent.
absl::StatusOr<BenchServeOptions> read_bench_serve_flags(const Args& args);

// "closed loop, concurrency 8" / "open loop, 4 req/s (Poisson), at most 16 in flight".
std::string describe_mode(const RunnerOptions& runner);

}  // namespace tessera::cli
