#include "runtime/model/rope.h"

#include <cmath>
#include <numbers>

namespace tessera {

std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int64_t half = config.head_dim / 2;
  std::vector<float> inv_freq(half);
  for (int64_t i = 0; i < half; ++i) {
    // Same float32 arithmetic as transformers: base ** (2i / d) in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    inv_freq[i] = 1.0f / std::pow(config.rope_theta, exponent);
  }
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
  }
  return inv_freq;
}

}  // namespace tessera
