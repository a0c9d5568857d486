#include "runtime/model/gemma.h"

namespace tessera {

// x = x + norm(attention(norm(x))); x = x + norm(mlp(norm(x)))
void GemmaModel::run_layer(StageRun& run, const DecoderLayer& l, int32_t i) const {
  run.norm_input(l.input_layernorm, l.qkv);                            // normed = norm(x)
  run.attention(l, i);                                                 // proj = o(attn(...))
  run.norm(run.proj(), l.post_attention_layernorm, run.sandwich());    // sandwich = norm(proj)
  run.add_norm(run.sandwich(), l.pre_feedforward_layernorm, l.gate_up);  // x += sandwich; normed
  run.mlp(l);                                                          // proj = down(act(...))
  run.norm(run.proj(), l.post_feedforward_layernorm, run.sandwich());  // sandwich = norm(proj)
  run.defer_add(run.sandwich());                                       // x += sandwich, later
}

}  // namespace tessera
