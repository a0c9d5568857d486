// Turns one sequence's next-token logits into a token on the host: penalties, then the shared
// sampling math (runtime/backend/sampling_math.h: temperature, top-k, min-p, top-p, the counter-based
// draw), and logprobs. One Sampler per sequence; it keeps the token counts the penalties need.
// Rows that need neither penalties nor logprobs may instead be sampled by a backend's sample op,
// which follows the same math, so a seeded request gets the same tokens either way.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/backend/sampling_math.h"

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
  bool has_seed = false;            // without a seed each request draws one at random
  bool logprobs = false;            // report each chosen token's logprob
  int32_t top_logprobs = 0;         // and this many alternatives (0..20)
  // (token id, bias) added to the logits before sampling (OpenAI's logit_bias); ids in the vocab.
  std::vector<std::pair<int32_t, float>> logit_bias;
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

  // The sequence's `counter`-th output token (counter = tokens generated so far) as a plain
  // SamplingRow, when the request needs nothing more (no penalties, no logprobs): a backend's
  // sample op can then pick it. nullopt when only sample() can.
  std::optional<SamplingRow> plain_row(uint64_t counter) const;

  // Samples the `counter`-th output token from `logits` [vocab] (overwritten: they are scratch
  // space) and records it for the penalties. `scratch` holds vocab-sized working buffers: one
  // per thread that samples (the engine's), not one per sequence.
  SampleResult sample(std::span<float> logits, uint64_t counter, SamplingScratch& scratch);

 private:
  SamplingRow row(uint64_t counter) const;
  // Counts a token for the penalties.
  void observe(int32_t token);
  // Whether the logits are transformed before the shared math (penalties, logit bias).
  bool transforms_logits() const;
  bool wants_logprobs() const { return params_.logprobs || params_.top_logprobs > 0; }
  // The penalties, then the logit bias.
  void apply_transforms(std::span<float> logits) const;

  SamplingParams params_;
  uint64_t seed_;  // the request's, or drawn once at construction
  std::unordered_map<int32_t, int32_t> output_counts_;  // token -> times generated
  std::vector<int32_t> seen_;                           // prompt and output tokens, unique
  std::vector<uint8_t> seen_mask_;                      // [vocab] grown on demand
  std::vector<std::pair<float, int32_t>> top_;          // top_logprobs scratch
};

}  // namespace tessera
