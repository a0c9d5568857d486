// How an RMSNorm scales (the backend's norms, and the communicator's all-reduce fused with one).
#pragma once

namespace tessera {

// out = x / rms(x) * (weight_offset + w). Gemma's checkpoints store w - 1 (offset 1); everyone
// else's store w (offset 0).
struct NormSpec {
  float eps = 1e-5f;
  float weight_offset = 0.0f;
};

}  // namespace tessera
