// Gemma 2 and Gemma 3 (text): sandwich norms around attention and the MLP, RMSNorm weights
// stored minus one, embeddings scaled by sqrt(hidden), GELU-tanh, soft-capped attention and
// logits (Gemma 2), alternating local (sliding) and global layers with their own rope theta
// (Gemma 3) -- the description carries all but the order of the norms, which is this file's.
#pragma once

#include "runtime/model/decoder_model.h"

namespace tessera {

class GemmaModel final : public DecoderModel {
 public:
  explicit GemmaModel(ModelConfig config) : DecoderModel(std::move(config)) {}

 private:
  void run_layer(StageRun& run, const DecoderLayer& l, int32_t i) const override;
};

}  // namespace tessera
