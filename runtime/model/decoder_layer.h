// One decoder layer's weights, as every family stores them once loaded: q/k/v fused into one
// projection (Phi-3 stores it fused already) and gate/up into another, the optional parts
// (biases, q/k norms, sandwich norms) left empty where the architecture has none. Loaded by HF
// name; which norm does what is the family's forward's business (Llama's post_attention_layernorm
// normalizes the MLP's input, Gemma's the attention's output).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/model/tensor_parallel.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model_io/model_config.h"

namespace tessera {

struct DecoderLayer {
  Tensor input_layernorm;             // [hidden]
  // Shapes of one rank: n_heads, n_kv_heads and intermediate are the rank's share.
  Tensor qkv;                         // [(n_heads + 2 * n_kv_heads) * head_dim, hidden]
  Tensor qkv_bias;                    // [qkv_width] (qkv_bias)
  Tensor q_norm, k_norm;              // [head_dim] each (qk_norm)
  Tensor o;                           // [hidden, n_heads * head_dim]
  Tensor post_attention_layernorm;    // [hidden]
  Tensor pre_feedforward_layernorm;   // [hidden] (sandwich_norms)
  Tensor post_feedforward_layernorm;  // [hidden] (sandwich_norms)
  Tensor gate_up;                     // [2 * intermediate, hidden]
  Tensor down;                        // [hidden, intermediate]
};

// Loads `shard`'s part of layer `i` of `config`'s family onto `backend` (all of it when the shard
// is the only rank); the norms are whole on every rank. The linear weights `skip` names (by
// LinearProjection) are left empty (loaded another way: FP8 codes as stored).
absl::StatusOr<DecoderLayer> load_decoder_layer(WeightLoader& loader, Backend& backend,
                                                const ModelConfig& config, int64_t i,
                                                const TensorParallelShard& shard,
                                                const std::array<bool, kLinearProjections>& skip = {});

// Elements of `shard`'s part of one layer's weights, as load_decoder_layer() stores them.
int64_t decoder_layer_elements(const ModelConfig& config, const TensorParallelShard& shard);
// A layer's linear weights (qkv, o, gate_up, down, by LinearProjection), `shard`'s part: rows
// (output features) x columns. What quantization stores in FP8, with an fp32 scale per row.
struct LinearWeightShape {
  int64_t rows = 0, cols = 0;
};
std::array<LinearWeightShape, kLinearProjections> decoder_layer_linear_shapes(
    const ModelConfig& config, const TensorParallelShard& shard);
// Where a linear weight of layer i comes from: the stored tensors (whole, or `shard`'s rows or
// columns of them) stacked along the rows into `shape`.
struct LinearWeightParts {
  std::vector<WeightPart> parts;
  LinearWeightShape shape;
};
std::array<LinearWeightParts, kLinearProjections> decoder_layer_linear_parts(
    const ModelConfig& config, int64_t i, const TensorParallelShard& shard);

// Whether every linear weight `quantization: fp8` would keep in FP8 (all but those `keep` names in
// every layer) has a shape FP8 GEMMs take: rows and columns multiples of 16 (16-byte rows of
// codes and of 16-bit outputs). InvalidArgument naming the projection, its shape on `shard` and
// the quantization_keep entry that leaves it in the compute dtype.
absl::Status check_fp8_linear_shapes(const ModelConfig& config, const TensorParallelShard& shard,
                                     const QuantizationKeep& keep);

// `staged` (loaded in the compute dtype, in memory about to be freed) kept in `arena`: its linear
// weights quantized to FP8 with one scale per row (Backend::quantize_fp8) but those `keep` says
// (by LinearProjection), which are copied like every other tensor, and those `stored` holds
// already (FP8 codes as the checkpoint stores them, in `arena`: staged has none of them). Adds
// the bytes kept to *bytes. Errors: the backend's (its synchronize()).
absl::StatusOr<DecoderLayer> keep_layer_fp8(const DecoderLayer& staged, Backend& backend,
                                            TensorArena& arena,
                                            const std::array<bool, kLinearProjections>& keep,
                                            const std::array<Tensor, kLinearProjections>& stored,
                                            size_t* bytes);

}  // namespace tessera
