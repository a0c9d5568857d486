// What LlamaModel and the StepRunner tell the placement planner it will allocate: the activations every pipeline
// stage holds, those only the last stage (the lm_head device) holds, and the KV cache per token.
#include <gtest/gtest.h>

#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/decoder_model.h"
#include "runtime/runner/step_runner.h"

namespace tessera {
namespace {

// Llama-3-8B's shape: a 128k vocabulary.
ModelConfig llama3_8b() {
  ModelConfig c;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  return c;
}

// No padding: the buffers hold exactly the limits' rows.
ExecutionOptions unpadded() {
  ExecutionOptions e;
  e.decode_graphs = DecodeGraphs::kOff;
  return e;
}

// The logits ([rows, vocab] fp32, ~131 MB here) exist on the last stage only: a stage without
// lm_head must not be charged for them.
TEST(LlamaFootprint, OnlyTheHeadActivationsGrowWithTheVocabulary) {
  const ForwardLimits limits{2048, 256};
  ModelConfig c = llama3_8b();
  auto bytes = [&] {
    return StepRunner::activation_bytes(DecoderModel::activation_cost(c, DType::kBF16), c.hidden_size,
                                        c.vocab_size, limits, unpadded(), DType::kBF16);
  };
  const uint64_t stage = bytes().stage;
  const uint64_t head = bytes().head;
  // lm_head's input rows (bf16), the fp32 logits, the sampled int32 tokens.
  EXPECT_EQ(head, 256u * (4096 * 2 + 128256 * 4 + 4));
  c.vocab_size *= 2;
  EXPECT_EQ(bytes().stage, stage);
  EXPECT_EQ(bytes().head, head + 256u * 128256 * 4);
}

// The planner's KV cost per token is the cache's own formula, so its token capacity is what
// KvCache::create will allocate.
TEST(LlamaFootprint, KvBytesPerTokenAreTheCachesOwn) {
  const ModelFootprint f = DecoderModel::footprint(llama3_8b(), DType::kBF16);
  EXPECT_EQ(f.kv_bytes_per_token_per_layer, 4096u);  // K and V: 2 x 8 heads x 128 x 2 bytes
  const KvCacheShape one_block{32, 1, 16, 8, 128};
  EXPECT_EQ(one_block.bytes_per_block(DType::kBF16), 32 * 16 * f.kv_bytes_per_token_per_layer);
  // kv_cache_dtype: fp8 -- a byte per element, twice the tokens in the same memory.
  const ModelFootprint fp8_kv = DecoderModel::footprint(llama3_8b(), DType::kBF16, 1,
                                                        Quantization::kNone, {}, DType::kF8_E4M3);
  EXPECT_EQ(fp8_kv.kv_bytes_per_token_per_layer, 2048u);
  EXPECT_EQ(one_block.bytes_per_block(DType::kF8_E4M3), 32 * 16 * fp8_kv.kv_bytes_per_token_per_layer);
  EXPECT_EQ(fp8_kv.layer_bytes, f.layer_bytes);
}

// FP8 weights: a byte per linear weight and an fp32 scale per row of each, the norms as before.
TEST(LlamaFootprint, Fp8LayersHoldTheirLinearWeightsInABytePerElement) {
  const ModelConfig c = llama3_8b();
  const ModelFootprint bf16 = DecoderModel::footprint(c, DType::kBF16);
  const ModelFootprint fp8 = DecoderModel::footprint(c, DType::kBF16, 1, Quantization::kFp8);
  const uint64_t linear = (6144u * 4096 + 4096u * 4096 + 3u * 14336 * 4096);
  const uint64_t norms = 2u * 4096;
  EXPECT_EQ(bf16.layer_bytes[0], 2 * (linear + norms));
  const uint64_t rows = 6144u + 4096 + 2u * 14336 + 4096;
  EXPECT_EQ(fp8.layer_bytes[0], linear + 2 * norms + 4 * rows);
  EXPECT_EQ(fp8.embedding_bytes, bf16.embedding_bytes);  // embeddings and lm_head stay bf16
  EXPECT_EQ(fp8.lm_head_bytes, bf16.lm_head_bytes);
  // Under tensor parallelism each rank's share.
  const ModelFootprint tp2 = DecoderModel::footprint(c, DType::kBF16, 2, Quantization::kFp8);
  // Rows split for qkv and gate_up (column-parallel), whole for o and down (row-parallel).
  const uint64_t tp2_rows = 3072u + 4096 + 14336 + 4096;
  EXPECT_EQ(tp2.layer_bytes[0], linear / 2 + 2 * norms + 4 * tp2_rows);
}

// quantization_keep: the layers and projections it names keep two bytes a weight and no scales.
TEST(LlamaFootprint, KeptWeightsStayInTheComputeDtype) {
  const ModelConfig c = llama3_8b();
  const ModelFootprint bf16 = DecoderModel::footprint(c, DType::kBF16);
  const ModelFootprint fp8 = DecoderModel::footprint(c, DType::kBF16, 1, Quantization::kFp8);
  const ModelFootprint kept = DecoderModel::footprint(c, DType::kBF16, 1, Quantization::kFp8,
                                                      *QuantizationKeep::parse("down,layers.0"));
  EXPECT_EQ(kept.layer_bytes[0], bf16.layer_bytes[0]);  // the whole layer
  // Elsewhere down stays bf16: its FP8 saving (a byte a weight less, no 4096 scales) is undone.
  const uint64_t down = 4096u * 14336;
  EXPECT_EQ(kept.layer_bytes[1], fp8.layer_bytes[1] + down - 4 * 4096);
  EXPECT_EQ(kept.layer_bytes[31], kept.layer_bytes[1]);
}

// FP8 GEMMs take rows and columns in multiples of 16: a projection that has neither is refused
// with its shape and the quantization_keep entry that leaves it in the compute dtype.
TEST(LlamaFootprint, Fp8NeedsLinearShapesInMultiplesOf16) {
  ModelConfig c = llama3_8b();
  EXPECT_TRUE(check_fp8_linear_shapes(c, tensor_parallel_shard(c, 0, 1), {}).ok());
  EXPECT_TRUE(check_fp8_linear_shapes(c, tensor_parallel_shard(c, 0, 2), {}).ok());
  c.intermediate_size = 1000;  // down reads 1000 columns
  const absl::Status s = check_fp8_linear_shapes(c, tensor_parallel_shard(c, 0, 1), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("the down weights are 4096 x 1000"), std::string::npos)
      << s;
  EXPECT_NE(std::string(s.message()).find("quantization_keep: down"), std::string::npos) << s;
  EXPECT_TRUE(
      check_fp8_linear_shapes(c, tensor_parallel_shard(c, 0, 1), *QuantizationKeep::parse("down"))
          .ok());
}

}  // namespace
}  // namespace tessera
