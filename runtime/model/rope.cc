#include "runtime/model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tessera {

namespace {

// transformers' yarn: the dimension at which `rotations` turns fit the original context.
double yarn_correction_dim(double rotations, int64_t dim, double base, int64_t max_position) {
  return (static_cast<double>(dim) *
          std::log(static_cast<double>(max_position) / (rotations * 2.0 * std::numbers::pi))) /
         (2.0 * std::log(base));
}

// Frequencies past beta_fast rotations are kept (extrapolated), below beta_slow divided by the
// factor (interpolated), blended linearly between.
void apply_yarn(const RopeScaling& s, float theta, int64_t dim, std::vector<float>& inv_freq) {
  double low = std::floor(yarn_correction_dim(s.beta_fast, dim, theta, s.original_max_position));
  double high = std::ceil(yarn_correction_dim(s.beta_slow, dim, theta, s.original_max_position));
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float ramp = std::clamp(static_cast<float>((static_cast<double>(i) - low) / (high - low)),
                                  0.0f, 1.0f);
    const float extrapolation = 1.0f - ramp;
    const float extrapolated = inv_freq[i], interpolated = inv_freq[i] / s.factor;
    inv_freq[i] = interpolated * (1.0f - extrapolation) + extrapolated * extrapolation;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& config, bool sliding_layer) {
  const int64_t half = config.head_dim / 2;
  // Gemma 3's sliding layers turn at their own theta and are not scaled.
  const bool local = sliding_layer && config.rope_local_theta > 0.0f;
  const float theta = local ? config.rope_local_theta : config.rope_theta;
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    // Same float32 arithmetic as transformers: base ** (2i / d) in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    inv_freq[i] = 1.0f / std::pow(theta, exponent);
  }
  if (local) return inv_freq;
  const RopeScaling& s = config.rope_scaling;
  switch (s.type) {
    case RopeScaling::Type::kNone:
      break;
    case RopeScaling::Type::kLinear:
      for (float& f : inv_freq) f /= s.factor;
      break;
    case RopeScaling::Type::kLlama3: {
      // Long wavelengths are slowed by `factor`, short ones kept, the band between blended.
      const float old_ctx = static_cast<float>(s.original_max_position);
      const float low_freq_wavelen = old_ctx / s.low_freq_factor;
      const float high_freq_wavelen = old_ctx / s.high_freq_factor;
      for (float& f : inv_freq) {
        const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
        if (wavelen > low_freq_wavelen) {
          f /= s.factor;
        } else if (wavelen >= high_freq_wavelen) {
          const float smooth =
              (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          f = (1.0f - smooth) * f / s.factor + smooth * f;
        }
      }
      break;
    }
    case RopeScaling::Type::kYarn:
      apply_yarn(s, theta, config.head_dim, inv_freq);
      break;
  }
  return inv_freq;
}

float rope_attention_factor(const ModelConfig& config) {
  const RopeScaling& s = config.rope_scaling;
  if (s.type != RopeScaling::Type::kYarn) return 1.0f;
  if (s.attention_factor > 0.0f) return s.attention_factor;
  return s.factor <= 1.0f ? 1.0f : 0.1f * std::log(s.factor) + 1.0f;
}

}  // namespace tessera
