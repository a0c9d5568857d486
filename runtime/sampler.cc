#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

namespace {

// log(sum(exp(x))) computed stably.
float log_sum_exp(std::span<const float> x) {
  float max_v = -std::numeric_limits<float>::infinity();
  for (float v : x) max_v = std::max(max_v, v);
  double sum = 0.0;
  for (float v : x) sum += std::exp(static_cast<double>(v - max_v));
  return max_v + static_cast<float>(std::log(sum));
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::span<const int32_t> prompt)
    : params_(params), rng_(params.has_seed ? params.seed : std::random_device{}()) {
  for (int32_t t : prompt) {
    if (t < 0) continue;
    if (static_cast<size_t>(t) >= seen_mask_.size()) seen_mask_.resize(t + 1, 0);
    if (!seen_mask_[t]) {
      seen_mask_[t] = 1;
      seen_.push_back(t);
    }
  }
}

void Sampler::observe(int32_t token) {
  ++output_counts_[token];
  if (static_cast<size_t>(token) >= seen_mask_.size()) seen_mask_.resize(token + 1, 0);
  if (!seen_mask_[token]) {
    seen_mask_[token] = 1;
    seen_.push_back(token);
  }
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (params_.repetition_penalty != 1.0f) {
    for (int32_t t : seen_) {
      if (t >= vocab) continue;
      float& l = logits[t];
      l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
  }
  if (params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f) {
    for (const auto& [t, count] : output_counts_) {
      if (t >= vocab) continue;
      logits[t] -= params_.frequency_penalty * count + params_.presence_penalty;
    }
  }
}

SampleResult Sampler::sample(std::span<float> logits) {
  SampleResult result;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  // Logprobs describe the model's own distribution, before any sampling transform; they cost a
  // pass of exp() over the vocabulary, so only when asked for.
  const bool want_logprobs = params_.logprobs || params_.top_logprobs > 0;
  const float lse = want_logprobs ? log_sum_exp(logits) : 0.0f;
  if (params_.top_logprobs > 0) {
    const int32_t k = std::min(params_.top_logprobs, vocab);
    candidates_.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], i};
    std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    for (int32_t i = 0; i < k; ++i)
      result.top.push_back({candidates_[i].second, candidates_[i].first - lse});
  }
  const bool transforms = params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                          params_.presence_penalty != 0.0f;
  std::vector<float> raw;  // the untransformed logits, kept only for the logprob
  if (transforms) {
    if (want_logprobs) raw.assign(logits.begin(), logits.end());
    apply_penalties(logits);
  }

  int32_t chosen = 0;
  if (params_.temperature <= 0.0f) {
    chosen = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    // Candidates (cut to the top-k, sorted, when top-k or top-p need an order), weighted by
    // softmax at the temperature.
    candidates_.resize(vocab);
    for (int32_t i = 0; i < vocab; ++i) candidates_[i] = {logits[i], i};
    const int32_t k = params_.top_k > 0 ? std::min(params_.top_k, vocab) : vocab;
    if (k < vocab || params_.top_p < 1.0f) {
      auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first; };
      std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), by_logit);
      candidates_.resize(k);
    }
    float max_logit = candidates_[0].first;
    for (const auto& c : candidates_) max_logit = std::max(max_logit, c.first);
    double total = 0.0;
    for (auto& [value, id] : candidates_) {
      value = static_cast<float>(std::exp((value - max_logit) / params_.temperature));
      total += value;
    }
    // top-p: the smallest prefix (candidates are sorted here) whose mass reaches top_p.
    if (params_.top_p < 1.0f) {
      double mass = 0.0;
      for (size_t i = 0; i < candidates_.size(); ++i) {
        mass += candidates_[i].first / total;
        if (mass >= params_.top_p) {
          candidates_.resize(i + 1);
          break;
        }
      }
    }
    // min-p: drop tokens less likely than min_p times the most likely one (whose weight is 1).
    if (params_.min_p > 0.0f) {
      std::erase_if(candidates_, [&](const auto& c) { return c.first < params_.min_p; });
    }
    double kept_mass = 0.0;
    for (const auto& c : candidates_) kept_mass += c.first;
    double u = std::uniform_real_distribution<double>(0.0, kept_mass)(rng_);
    chosen = candidates_.back().second;
    for (const auto& [weight, id] : candidates_) {
      u -= weight;
      if (u < 0) {
        chosen = id;
        break;
      }
    }
  }
  result.token = chosen;
  // Without transforms `logits` still holds the raw values (sampling works on candidates_).
  if (want_logprobs) result.logprob = (transforms ? raw[chosen] : logits[chosen]) - lse;
  observe(chosen);
  return result;
}

}  // namespace tessera
