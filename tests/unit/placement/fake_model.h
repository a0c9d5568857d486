// What the placement tests plan for: a model whose every split can be worked out by hand, and
// devices of given free memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/placement/placement_planner.h"

namespace tessera::placement_test {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// 32 layers of 1 GiB, 1 GiB embeddings and lm_head (none when tied), an 8 KiB final norm,
// 64 KiB of KV per token and layer.
inline ModelFootprint model32(bool tied = false) {
  ModelFootprint m;
  m.embedding_bytes = kGiB;
  m.layer_bytes.assign(32, kGiB);
  m.final_norm_bytes = 8 * kKiB;
  m.lm_head_bytes = tied ? 0 : kGiB;
  m.tied_embeddings = tied;
  m.kv_bytes_per_token_per_layer = 64 * kKiB;
  return m;
}

}  // namespace tessera::placement_test
