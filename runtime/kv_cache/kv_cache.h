// The paged KV cache: per layer, K and V pools of fixed-size blocks; the block allocator with its
// prefix cache (block_allocator.h); and per-sequence block tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend/layer_segment.h"
#include "runtime/kv_cache/block_allocator.h"

namespace tessera {

// The blocks one sequence's tokens live in, in order.
class BlockTable {
 public:
  // Grows the table to hold `num_tokens`; false (and no change) when blocks run out.
  bool reserve(int32_t num_tokens, int32_t block_size, BlockAllocator& allocator);
  // Appends blocks that hold K/V already (a cached prefix, BlockAllocator::match_prefix), taking
  // one reference to each.
  void share(std::span<const int32_t> blocks, BlockAllocator& allocator);
  // Gives every block back, last first: a sequence's tail is then evicted before its head, which
  // more requests share.
  void release(BlockAllocator& allocator);
  int32_t slot(int32_t position, int32_t block_size) const {
    return blocks_[position / block_size] * block_size + position % block_size;
  }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }

 private:
  std::vector<int32_t> blocks_;
};

// One sequence's step of its tokens ids[first, first + count) at positions first.., over the
// blocks of `table` (context first + count; no logit rows): a prefill chunk of an offline pass
// (perplexity, KV calibration, tests).
StepBatch sequence_chunk(const BlockTable& table, int32_t block_size,
                         std::span<const int32_t> ids, int32_t first, int32_t count);

// Bytes of K and V of one token in one layer, in `dtype`: the one formula every KV cache size is
// made of (a block, a pool, the placement planner's cost per token).
size_t kv_bytes_per_token_per_layer(int64_t num_kv_heads, int64_t head_dim, DType dtype);

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  // Bytes of one block of one layer, K and V, in `dtype`.
  size_t bytes_per_layer_block(DType dtype) const;
  // Bytes of one block across every layer, K and V, in `dtype`.
  size_t bytes_per_block(DType dtype) const;
};

class KvCache {
 public:
  // One pool on `backend` for every layer, of `dtype` elements (unset: the backend's compute
  // dtype; kF8_E4M3 where its prepare_kv_cache accepted it).
  static absl::StatusOr<std::unique_ptr<KvCache>> create(Backend& backend, KvCacheShape shape,
                                                         std::optional<DType> dtype = {});
  // One pool per segment and rank, on its backend, for its layers (a model split over devices;
  // `shape` is one rank's: its KV heads). Every pool has the same blocks: a sequence's block table
  // addresses all of its layers on every rank.
  static absl::StatusOr<std::unique_ptr<KvCache>> create(std::span<const LayerSegment> segments,
                                                         KvCacheShape shape,
                                                         std::optional<DType> dtype = {});

  const KvCacheShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  // An FP8 cache's scales of layer `index` (value = code x scale): 1 until set. Set them before
  // any K/V is written under them (codes written under other scales read wrong).
  void set_scales(int32_t index, float k_scale, float v_scale);
  float k_scale(int32_t index) const { return scales_[index].k; }
  float v_scale(int32_t index) const { return scales_[index].v; }
  // Calibration: from start_calibration() until finish_calibration(), every layer's view carries
  // an amax (KvLayerView::amax) that rope_and_cache raises to the largest |k| and |v| it writes;
  // finish hands back each layer's (largest |k|, largest |v|) over every rank.
  absl::Status start_calibration();
  absl::StatusOr<std::vector<std::pair<float, float>>> finish_calibration();
  int32_t block_size() const { return shape_.block_size; }
  // Layer `index`'s pools on tensor-parallel rank `rank` (its KV heads; rank 0 without tensor
  // parallelism).
  KvLayerView layer(int32_t index, int32_t rank = 0) const;
  BlockAllocator& allocator() { return allocator_; }
  const BlockAllocator& allocator() const { return allocator_; }
  // Unique to this cache among every cache of the process, ever: what recordings that write into
  // it are told apart by (an address may be reused by a later cache).
  uint64_t id() const { return id_; }

 private:
  KvCache(KvCacheShape shape, DType dtype);
  uint64_t id_;
  KvCacheShape shape_;
  DType dtype_;
  // Per segment and rank: [its layers, 2 (k, v), num_blocks, block_size, n_kv_heads, head_dim].
  std::vector<DeviceBuffer> pools_;
  // [rank][num_layers]: layer i's K pool, then its V pool, on that rank.
  std::vector<std::vector<char*>> layer_base_;
  struct LayerScales {
    float k = 1.0f;
    float v = 1.0f;
  };
  std::vector<LayerScales> scales_;  // [num_layers]
  // Each pool's backend and first layer, and during calibration its layers' amax pairs.
  struct PoolOwner {
    Backend* backend = nullptr;
    int32_t rank = 0;
    int32_t first_layer = 0;
    int32_t num_layers = 0;
    DeviceBuffer amax;  // [num_layers][2] fp32 while calibrating
  };
  std::vector<PoolOwner> owners_;
  // [rank][num_layers]: layer i's amax pair while calibrating, else null.
  std::vector<std::vector<float*>> layer_amax_;
  BlockAllocator allocator_;
};

}  // namespace tessera
