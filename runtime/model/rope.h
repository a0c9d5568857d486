// Rotary embedding frequencies, with the rope scaling schemes the supported families declare
// (linear, llama3, yarn) and Gemma 3's own theta for its sliding layers.
#pragma once

#include <vector>

#include "runtime/model_io/model_config.h"

namespace tessera {

// inv_freq [head_dim / 2]: the angle per position of each rotated pair, after scaling, for a
// sliding-window layer or a full one (they differ only where rope_local_theta is set).
std::vector<float> rope_inv_freq(const ModelConfig& config, bool sliding_layer = false);

// The factor yarn puts on cos and sin (so on every q.k twice); 1 for every other scaling.
float rope_attention_factor(const ModelConfig& config);

}  // namespace tessera
