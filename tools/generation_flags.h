// Sampling and stopping flags shared by the generating commands: `run` (offline) takes the
// sampling group, `generate` and `chat` (against a server) take both groups. Parsing and range
// checks live here once; each command turns GenerationFlags into its own request type.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/cli_args.h"

namespace tessera::cli {

struct GenerationFlags {
  // Sampling group.
  int32_t max_tokens = 256;      // --max-tokens, > 0
  float temperature = 0.7f;      // --temperature, >= 0; 0 = greedy
  int32_t top_k = 0;             // --top-k, >= 0; 0 = off
  float top_p = 1.0f;            // --top-p, (0, 1]
  float min_p = 0.0f;            // --min-p, [0, 1]
  std::optional<uint64_t> seed;  // --seed; unset or negative = a random seed per request
  // Server group.
  int32_t min_tokens = 0;           // --min-tokens, [0, max_tokens]
  float repetition_penalty = 1.0f;  // --repetition-penalty, > 0; 1 = off
  float frequency_penalty = 0.0f;   // --frequency-penalty, [-2, 2]
  float presence_penalty = 0.0f;    // --presence-penalty, [-2, 2]
  std::vector<std::string> stop;    // --stop STR, repeatable, non-empty
  bool ignore_eos = false;          // --ignore-eos
  std::optional<int32_t>
      logprobs;  // --logprobs N: each token's logprob and N alternatives, [0, 20]
};

// --max-tokens --temperature --top-k --top-p --min-p --seed
const std::set<std::string>& sampling_value_flags();
// --min-tokens --repetition-penalty --frequency-penalty --presence-penalty --stop --logprobs
const std::set<std::string>& server_generation_value_flags();
// --ignore-eos
const std::set<std::string>& server_generation_bool_flags();

// Reads and range-checks every generation flag present in `args` (absent ones keep their
// defaults). Errors name the flag and the allowed range.
absl::StatusOr<GenerationFlags> read_generation_flags(const Args& args);

// Usage text for the two groups, one flag per line, indented for a command's help.
const char* sampling_flags_usage();
const char* server_generation_flags_usage();

}  // namespace tessera::cli
