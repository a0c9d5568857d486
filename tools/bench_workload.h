// Synthetic requests for `tessera bench serve`, made of random token ids (exact lengths, no
// tokenizer involved) or of random English words (calibrated with the server's tokenizer to the
// sampled length), each with ignore_eos and max_tokens = the sampled output length, so that every
// request generates exactly that many tokens. Four workloads:
//   random         prompts of prompt_len, outputs of output_len
//   shared-prefix  prefix_count system prompts of prefix_len tokens, request i starting with
//                  prefix i mod prefix_count, then a user part of prompt_len
//   multi-turn     conversations x turns: each turn a user part of prompt_len and an answer of
//                  output_len; a turn's prompt is the conversation so far (every earlier user
//                  part and answer) and its user part. The runner sends a turn once the one
//                  before it finished, the history filled in from what the server generated.
//   sharegpt       prompt and output lengths shaped like ShareGPT's (sharegpt_lengths)
// Also the Poisson arrival process of the open-loop mode. Everything is seeded: same seed, same
// workload.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/tessera.pb.h"
#include "tools/length_distribution.h"

namespace tessera::cli {

enum class PromptKind { kTokenIds, kWords };
enum class WorkloadKind { kRandom, kSharedPrefix, kMultiTurn, kShareGpt };

// "random", "shared-prefix", "multi-turn", "sharegpt".
const char* workload_name(WorkloadKind kind);
absl::StatusOr<WorkloadKind> parse_workload_kind(const std::string& name);

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kRandom;
  // random: the prompt; shared-prefix: the user part after the prefix; multi-turn: each turn's
  // user part. Not used by sharegpt.
  LengthDistribution prompt_len = LengthDistribution::fixed(128);
  LengthDistribution output_len = LengthDistribution::fixed(128);  // not used by sharegpt
  PromptKind prompt_kind = PromptKind::kTokenIds;
  size_t count = 100;           // requests to synthesize (multi-turn: conversations x turns)
  int32_t prefix_count = 4;     // shared-prefix: distinct system prompts
  int32_t prefix_len = 256;     // shared-prefix: tokens of each
  int32_t conversations = 8;    // multi-turn
  int32_t turns = 4;            // multi-turn: turns of each conversation
  int64_t max_model_len = 0;    // sharegpt: lengths kept within it; 0 = no limit
  int64_t vocab_size = 0;       // token ids are drawn from [0, vocab_size) (kTokenIds)
  std::string model;            // GenerateRequest.model
  uint64_t seed = 0;
};

struct BenchRequest {
  v1::GenerateRequest request;  // multi-turn: only this turn's user part
  int32_t prompt_len = 0;  // tokens (kWords: as the tokenizer counted them); multi-turn: of the
                           // whole history this turn sends, as the lengths add up
  int32_t output_len = 0;  // tokens the request must generate
  int32_t conversation = -1;  // multi-turn: the conversation it is a turn of; -1 = none
  int32_t turn = 0;           // multi-turn: 0 = the first
};

// Counts the tokens the server's tokenizer makes of a prompt (BOS included when it adds one).
using TokenCounter = std::function<absl::StatusOr<int32_t>(const std::string& text)>;

// `count_tokens` is needed for kWords only. Multi-turn workloads come conversation by
// conversation, turns in order.
absl::StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& options,
                                                         const TokenCounter& count_tokens);

// ShareGPT's prompt and output lengths as vLLM's paper reports them, log-normal (see the .cc for
// the figures), drawn as vLLM's benchmark_serving filters ShareGPT: prompt and output of at least
// 4 tokens, prompt at most 1024, prompt + output at most 2048 -- and at most `max_model_len`
// when it is not 0.
struct ShareGptLengths {
  int32_t prompt_len;
  int32_t output_len;
};
ShareGptLengths sharegpt_lengths(std::mt19937_64& rng, int64_t max_model_len);

// Gaps between arrivals of a Poisson process of `rate` requests per second (exponential,
// mean 1 / rate); an infinite rate gives zero gaps.
class PoissonArrivals {
 public:
  PoissonArrivals(double rate, uint64_t seed) : rate_(rate), rng_(seed) {}
  double next_gap_seconds();

 private:
  double rate_;
  std::mt19937_64 rng_;
};

}  // namespace tessera::cli
