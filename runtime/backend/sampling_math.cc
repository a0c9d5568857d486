#include "runtime/backend/sampling_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "base/splitmix64.h"

namespace tessera {

double log_sum_exp(const float* x, size_t n) {
  float max_v = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) max_v = std::max(max_v, x[i]);
  if (n == 0 || std::isinf(max_v)) return max_v;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max_v);
  return max_v + std::log(sum);
}

uint32_t sampling_draw_bits(uint64_t seed, uint64_t counter) {
  // SplitMix64's state after `counter + 1` steps from mix(seed): mixing the seed first keeps
  // seeds that differ by a multiple of the gamma from sharing a shifted stream.
  const uint64_t state = splitmix64(seed) + (counter + 1) * kSplitMix64Gamma;
  return static_cast<uint32_t>(splitmix64(state) >> (64 - kSamplingDrawBits));
}

SamplingOutcome sample_reference(std::span<const float> logits, const SamplingRow& row,
                                 SamplingScratch& scratch) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int64_t vocab = static_cast<int64_t>(logits.size());
  int64_t argmax = 0;
  bool finite = vocab > 0 && std::isfinite(logits[0]);
  for (int64_t i = 1; i < vocab; ++i) {
    finite = finite && std::isfinite(logits[i]);
    if (logits[i] > logits[argmax]) argmax = i;
  }
  // A NaN or infinite logit (a broken model) gives no distribution to sample: token -1, which the
  // engine refuses with an error naming it.
  if (!finite) return {-1, kInf};
  if (!(row.temperature > 0.0f)) return {static_cast<int32_t>(argmax), kInf};
  const float max_logit = logits[argmax];
  double margin = kInf;

  // 1. top-k: the k-th largest logit, exactly, through its order-preserving key.
  std::vector<uint32_t>& keys = scratch.keys;
  keys.resize(vocab);
  for (int64_t i = 0; i < vocab; ++i) keys[i] = sampling_logit_key(logits[i]);
  uint32_t kth_key = 0;
  if (row.top_k > 0 && row.top_k < vocab) {
    scratch.selected.assign(keys.begin(), keys.end());
    auto kth = scratch.selected.begin() + (row.top_k - 1);
    std::nth_element(scratch.selected.begin(), kth, scratch.selected.end(), std::greater<>());
    kth_key = *kth;
  }

  // 2. min-p, and every surviving token's mass.
  std::vector<uint64_t>& mass = scratch.mass;
  mass.assign(vocab, 0);
  uint64_t total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (keys[i] < kth_key) continue;
    const float w = sampling_weight(logits[i], max_logit, row.temperature);
    if (row.min_p > 0.0f) {
      margin = std::min(margin, std::abs(static_cast<double>(w) - row.min_p) / row.min_p);
      if (w < row.min_p) continue;
    }
    mass[i] = sampling_mass(w);
    total += mass[i];
  }

  // 3. top-p: walk the survivors from the largest logit down, a whole group of equal logits at a
  // time, until the kept mass reaches the target; that group's logit is the threshold.
  uint32_t tau_key = kth_key;
  uint64_t kept_mass = total;
  if (row.top_p < 1.0f) {
    auto& candidates = scratch.candidates;
    candidates.clear();
    for (int64_t i = 0; i < vocab; ++i) {
      if (keys[i] >= kth_key && mass[i] > 0) candidates.emplace_back(keys[i], mass[i]);
    }
    std::sort(candidates.begin(), candidates.end(), std::greater<>());
    const uint64_t target = sampling_top_p_target(row.top_p, total);
    uint64_t reached = 0;
    for (size_t j = 0; j < candidates.size();) {
      const uint32_t key = candidates[j].first;
      const uint64_t before = reached;
      for (; j < candidates.size() && candidates[j].first == key; ++j) reached += candidates[j].second;
      if (reached >= target) {
        tau_key = key;
        kept_mass = reached;
        margin = std::min(margin, static_cast<double>(std::min(reached - target, target - before)) /
                                      static_cast<double>(total));
        break;
      }
    }
  }

  // 4. The draw, by inverse CDF over the kept tokens in index order. The most likely token is
  // always kept with mass 2^40, so the draw point (< kept_mass) always lands on a token.
  const uint64_t point = sampling_draw_point(sampling_draw_bits(row.seed, row.counter), kept_mass);
  uint64_t cumulative = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (keys[i] < tau_key || mass[i] == 0) continue;
    const uint64_t before = cumulative;
    cumulative += mass[i];
    if (cumulative > point) {
      margin = std::min(margin, static_cast<double>(std::min(point - before, cumulative - point)) /
                                    static_cast<double>(kept_mass));
      return {static_cast<int32_t>(i), margin};
    }
  }
  return {static_cast<int32_t>(argmax), margin};  // unreachable while kept_mass > point
}

}  // namespace tessera
