// How a model's layers are split over the ranks of a tensor-parallel group (Megatron-LM's split,
// which vLLM, SGLang and TensorRT-LLM share): q/k/v and gate/up by output features (each rank its
// heads and its share of the MLP), o and down by input features (each rank's partial sums added by
// one all-reduce after each), the embeddings and lm_head by vocabulary rows. KV heads are split
// like the q heads; with fewer KV heads than ranks each rank holds the one its q heads read
// (replicated over the ranks that share it).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/model_io/model_config.h"

namespace tessera {

struct TensorParallelShard {
  int32_t rank = 0;
  int32_t size = 1;
  int64_t first_head = 0;  // q heads [first_head, first_head + heads)
  int64_t heads = 0;
  int64_t first_kv_head = 0;
  int64_t kv_heads = 0;
  int64_t first_intermediate = 0;  // MLP features [first, first + intermediate)
  int64_t intermediate = 0;
  int64_t first_vocab = 0;  // vocabulary rows [first_vocab, first_vocab + vocab_rows)
  int64_t vocab_rows = 0;   // the same on every rank: ceil(vocab / size)
  int64_t vocab_real = 0;   // of those, rows the vocabulary has (the last rank's may be fewer)
};

// OK when `size` ranks can split `config`: it divides the attention heads and the intermediate
// size, and the KV heads divide by it or it by them. Errors name the key and the numbers.
absl::Status check_tensor_parallel(const ModelConfig& config, int32_t size);

// Rank `rank`'s share (check_tensor_parallel passed).
TensorParallelShard tensor_parallel_shard(const ModelConfig& config, int32_t rank, int32_t size);

// `config` as one rank of `shard` sees it: its heads, KV heads, intermediate size and vocabulary
// rows (what a rank's GEMMs and buffers are shaped by).
ModelConfig rank_config(const ModelConfig& config, const TensorParallelShard& shard);

}  // namespace tessera
