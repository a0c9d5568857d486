// The flags of `tessera bench serve` that pick the workload (bench_workload.h) and where to read
// what the server did with it: --workload, --prefix-count, --prefix-len, --conversations,
// --turns, --admin-server. Kept apart from bench_options (the load's shape and the connection).
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "tools/bench_workload.h"
#include "tools/cli_args.h"

namespace tessera::cli {

struct WorkloadFlags {
  WorkloadKind kind = WorkloadKind::kRandom;
  int32_t prefix_count = 4;
  int32_t prefix_len = 256;
  int32_t conversations = 8;
  int32_t turns = 4;
  std::string admin_address;  // --admin-server HOST:PORT; empty = the server's counters unread
};

const std::set<std::string>& bench_workload_value_flags();
const char* bench_workload_usage();

// Checks each flag against the workload it belongs to: --prefix-* need shared-prefix,
// --conversations / --turns need multi-turn (which also refuses --num-requests: it sends
// conversations x turns, and over --api openai needs word prompts, since answers come back as
// text), sharegpt refuses --prompt-len and --output-len (it draws its own).
absl::StatusOr<WorkloadFlags> read_bench_workload_flags(const Args& args);

}  // namespace tessera::cli
