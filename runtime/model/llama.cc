#include "runtime/model/llama.h"

namespace tessera {

// x = x + attention(norm(x)); x = x + mlp(norm(x))
void LlamaModel::run_layer(StageRun& run, const DecoderLayer& l, int32_t i) const {
  run.norm_input(l.input_layernorm, l.qkv);               // normed = norm(x)
  run.attention(l, i);                                    // proj = o(attn(rope(qkv(normed))))
  run.add_norm_proj(l.post_attention_layernorm, l.gate_up);  // x += proj; normed = norm(x)
  run.mlp(l);                                             // proj = down(act(gate, up))
  run.defer_add_proj();                                   // x += proj, in the next norm
}

}  // namespace tessera
