#include "runtime/model/tensor_parallel.h"

#include <algorithm>

#include "base/str_cat.h"

namespace tessera {

absl::Status check_tensor_parallel(const ModelConfig& c, int32_t size) {
  if (size < 1) {
    return absl::InvalidArgumentError(
        str_cat("tensor_parallel_size: ", size, " is not a positive count of GPUs"));
  }
  if (size == 1) return absl::OkStatus();
  if (c.num_heads % size != 0) {
    return absl::InvalidArgumentError(str_cat("tensor_parallel_size: ", size,
                                              " does not divide the model's ", c.num_heads,
                                              " attention heads (num_attention_heads)"));
  }
  if (c.intermediate_size % size != 0) {
    return absl::InvalidArgumentError(str_cat("tensor_parallel_size: ", size,
                                              " does not divide the model's intermediate_size ",
                                              c.intermediate_size));
  }
  if (c.num_kv_heads % size != 0 && size % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(str_cat(
        "tensor_parallel_size: ", size, " and the model's ", c.num_kv_heads,
        " key/value heads (num_key_value_heads) do not divide one another, so the heads cannot be "
        "split or replicated evenly over the ranks"));
  }
  return absl::OkStatus();
}

TensorParallelShard tensor_parallel_shard(const ModelConfig& c, int32_t rank, int32_t size) {
  TensorParallelShard s;
  s.rank = rank;
  s.size = size;
  s.heads = c.num_heads / size;
  s.first_head = rank * s.heads;
  if (c.num_kv_heads >= size) {
    s.kv_heads = c.num_kv_heads / size;
    s.first_kv_head = rank * s.kv_heads;
  } else {
    // size / kv ranks share each KV head: the one their q heads' group reads.
    s.kv_heads = 1;
    s.first_kv_head = s.first_head / (c.num_heads / c.num_kv_heads);
  }
  s.intermediate = c.intermediate_size / size;
  s.first_intermediate = rank * s.intermediate;
  s.vocab_rows = (c.vocab_size + size - 1) / size;
  s.first_vocab = rank * s.vocab_rows;
  s.vocab_real = std::clamp<int64_t>(c.vocab_size - s.first_vocab, 0, s.vocab_rows);
  return s;
}

ModelConfig rank_config(const ModelConfig& config, const TensorParallelShard& shard) {
  ModelConfig c = config;
  c.num_heads = shard.heads;
  c.num_kv_heads = shard.kv_heads;
  c.intermediate_size = shard.intermediate;
  c.vocab_size = shard.vocab_rows;
  return c;
}

}  // namespace tessera
