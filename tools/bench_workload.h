// Synthetic requests for `tessera bench serve`: prompts of sampled lengths, made of random token
// ids (exact lengths, no tokenizer involved) or of random English words (calibrated with the
// server's tokenizer to the sampled length), each with ignore_eos and max_tokens = the sampled
// output length, so that every request generates exactly that many tokens. Also the Poisson
// arrival process of the open-loop mode. Everything is seeded: same seed, same workload.
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

struct WorkloadOptions {
  LengthDistribution prompt_len = LengthDistribution::fixed(128);
  LengthDistribution output_len = LengthDistribution::fixed(128);
  PromptKind prompt_kind = PromptKind::kTokenIds;
  size_t count = 100;      // requests to synthesize
  int64_t vocab_size = 0;  // token ids are drawn from [0, vocab_size) (kTokenIds)
  std::string model;       // GenerateRequest.model
  uint64_t seed = 0;
};

struct BenchRequest {
  v1::GenerateRequest request;
  int32_t prompt_len = 0;  // tokens (kWords: as the tokenizer counted them)
  int32_t output_len = 0;  // tokens the request must generate
};

// Counts the tokens the server's tokenizer makes of a prompt (BOS included when it adds one).
using TokenCounter = std::function<absl::StatusOr<int32_t>(const std::string& text)>;

// `count_tokens` is needed for kWords only.
absl::StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& options,
                                                         const TokenCounter& count_tokens);

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
