// Rotary embedding frequencies, with the rope scaling schemes Llama-family configs declare.
#pragma once

#include <vector>

#include "runtime/model_io/model_config.h"

namespace tessera {

// inv_freq [head_dim / 2]: the angle per position of each rotated pair, after scaling.
std::vector<float> rope_inv_freq(const ModelConfig& config);

}  // namespace tessera
