// The Llama-shaped decoder: Llama (SmolLM2, TinyLlama, Llama 2/3.x), Mistral, Qwen2/2.5, Qwen3
// and Phi-3 -- the same math, told apart by the architecture description (sliding windows,
// q/k/v bias, q/k norms, fused weights, rope scaling), which the shared layers read.
#pragma once

#include "runtime/model/decoder_model.h"

namespace tessera {

class LlamaModel final : public DecoderModel {
 public:
  explicit LlamaModel(ModelConfig config) : DecoderModel(std::move(config)) {}

 private:
  void run_layer(StageRun& run, const DecoderLayer& l, int32_t i) const override;
};

}  // namespace tessera
