#include "runtime/request/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace tessera {

namespace {

uint64_t random_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt)
    : params_(params), seed_(params.has_seed ? params.seed : random_seed()) {
  for (int32_t t : prompt) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= seen_mask_.size()) seen_mask_.resize(t + 1, 0);
    if (!seen_mask_[t]) {
      seen_mask_[t] = 1;
      seen_.push_back(t);
    }
  }
}

SamplingRow Sampler::row(uint64_t counter) const {
  return SamplingRow{params_.temperature, params_.top_k, params_.top_p, params_.min_p, seed_,
                     counter};
}

bool Sampler::transforms_logits() const {
  return params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
         params_.presence_penalty != 0.0f || !params_.logit_bias.empty();
}

std::optional<SamplingRow> Sampler::plain_row(uint64_t counter) const {
  if (transforms_logits() || wants_logprobs()) return std::nullopt;
  return row(counter);
}

void Sampler::observe(int32_t token) {
  ++output_counts_[token];
  if (static_cast<size_t>(token) >= seen_mask_.size()) seen_mask_.resize(token + 1, 0);
  if (!seen_mask_[token]) {
    seen_mask_[token] = 1;
    seen_.push_back(token);
  }
}

namespace {

// `logit` moved by a request's own transform: a finite logit stays finite (saturating at the
// largest float), so that a penalty or bias, however extreme, only orders the tokens and never
// reads as the non-finite logits of a broken model (which fault the model, see Engine::update);
// a logit that was not finite stays as it was.
void transform(float& logit, float moved) {
  if (!std::isfinite(logit)) return;
  logit = std::isfinite(moved) ? moved : std::copysign(std::numeric_limits<float>::max(), moved);
}

}  // namespace

void Sampler::apply_transforms(std::span<float> logits) const {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (params_.repetition_penalty != 1.0f) {
    for (int32_t t : seen_) {
      if (t >= vocab) continue;
      float& l = logits[t];
      transform(l, l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty);
    }
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for (const auto& [t, count] : output_counts_) {
      if (t >= vocab) continue;
      transform(logits[t], logits[t] - (params_.frequency_penalty * count + params_.presence_penalty));
    }
  }
  for (const auto& [t, bias] : params_.logit_bias) {
    if (t >= 0 && t < vocab) transform(logits[t], logits[t] + bias);
  }
}

SampleResult Sampler::sample(std::span<float> logits, uint64_t counter,
                             SamplingScratch& scratch) {
  SampleResult result;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  // Logprobs describe the model's own distribution, before any sampling transform; they cost a
  // pass of exp() over the vocabulary, so only when asked for.
  const bool want_logprobs = wants_logprobs();
  const float lse =
      want_logprobs ? static_cast<float>(log_sum_exp(logits.data(), logits.size())) : 0.0f;
  if (params_.top_logprobs > 0) {
    const int32_t k = std::min(params_.top_logprobs, vocab);
    top_.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) top_[i] = {logits[i], i};
    std::partial_sort(top_.begin(), top_.begin() + k, top_.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int32_t i = 0; i < k; ++i) result.top.push_back({top_[i].second, top_[i].first - lse});
  }
  const bool transforms = transforms_logits();
  std::vector<float> raw;  // the untransformed logits, kept only for the logprob
  if (transforms) {
    if (want_logprobs) raw.assign(logits.begin(), logits.end());
    apply_transforms(logits);
  }
  const int32_t chosen = sample_reference(logits, row(counter), scratch).token;
  result.token = chosen;
  if (chosen < 0) return result;  // non-finite logits: the engine fails the request
  // Without transforms `logits` still holds the raw values (the reference only reads them).
  if (want_logprobs) result.logprob = (transforms ? raw[chosen] : logits[chosen]) - lse;
  observe(chosen);
  return result;
}

}  // namespace tessera
