// Turns one sequence's next-token logits into a token: penalties, temperature, top-k, top-p,
// min-p, then a seeded draw (or argmax at temperature 0). One Sampler per sequence; it keeps the
// token counts the penalties need.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace tessera {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off; over prompt and output (HF semantics)
  float frequency_penalty = 0.0f;   // [-2, 2]; over output tokens (OpenAI semantics)
  float presence_penalty = 0.0f;    // [-2, 2]; over output tokens
  uint64_t seed = 0;
  bool has_seed = false;            // without a seed each request draws its own
  bool logprobs = false;            // report each chosen token's logprob
  int32_t top_logprobs = 0;         // and this many alternatives (0..20)
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;             // of the chosen token under the model's raw distribution
                                    // (only when logprobs or top_logprobs were asked for)
  std::vector<TokenLogprob> top;    // the `top_logprobs` most likely tokens, most likely first
};

class Sampler {
 public:
  Sampler(const SamplingParams& params, std::span<const int32_t> prompt);

  // Samples from `logits` [vocab] (overwritten: they are scratch space) and records the token.
  SampleResult sample(std::span<float> logits);

 private:
  // Counts a token for the penalties.
  void observe(int32_t token);
  void apply_penalties(std::span<float> logits) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int32_t> output_counts_;  // token -> times generated
  std::vector<int32_t> seen_;                           // prompt and output tokens, unique
  std::vector<uint8_t> seen_mask_;                      // [vocab] grown on demand
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch
};

}  // namespace tessera
