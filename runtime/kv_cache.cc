#include "runtime/kv_cache.h"

#include <cassert>

#include "absl/strings/str_cat.h"

namespace tessera {

BlockAllocator::BlockAllocator(int32_t num_blocks) : refcount_(num_blocks, 0) {
  free_.reserve(num_blocks);
  // Highest id at the bottom of the stack so that block 0 is handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  refcount_[b] = 1;
  return b;
}

void BlockAllocator::retain(int32_t block) {
  assert(refcount_[block] > 0);
  ++refcount_[block];
}

void BlockAllocator::release(int32_t block) {
  assert(refcount_[block] > 0);
  if (--refcount_[block] == 0) free_.push_back(block);
}

bool BlockTable::reserve(int32_t num_tokens, int32_t block_size, BlockAllocator& allocator) {
  const int32_t needed = (num_tokens + block_size - 1) / block_size;
  const int32_t missing = needed - num_blocks();
  if (missing <= 0) return true;
  if (missing > allocator.num_free()) return false;
  for (int32_t i = 0; i < missing; ++i) blocks_.push_back(*allocator.allocate());
  return true;
}

void BlockTable::release(BlockAllocator& allocator) {
  for (int32_t b : blocks_) allocator.release(b);
  blocks_.clear();
}

size_t KvCacheShape::bytes_per_block(DType dtype) const {
  return static_cast<size_t>(num_layers) * 2 * block_size * num_kv_heads * head_dim *
         element_size(dtype);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::create(Backend& backend, KvCacheShape shape) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0 || shape.num_layers <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache: need at least one block of at least "
                                                   "one token (got ", shape.num_blocks,
                                                   " blocks of ", shape.block_size, ")"));
  }
  const DType dtype = backend.compute_dtype();
  const size_t bytes = shape.bytes_per_block(dtype) * shape.num_blocks;
  auto pool = backend.allocate(bytes);
  if (!pool.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat("kv cache: ", shape.num_blocks, " blocks need ",
                                                     bytes, " bytes: ", pool.status().message()));
  }
  return std::unique_ptr<KvCache>(new KvCache(shape, dtype, *std::move(pool)));
}

KvCache::KvCache(KvCacheShape shape, DType dtype, DeviceBuffer pool)
    : shape_(shape), dtype_(dtype), pool_(std::move(pool)), allocator_(shape.num_blocks) {}

KvLayerView KvCache::layer(int32_t index) const {
  const int64_t per_pool = static_cast<int64_t>(shape_.num_blocks) * shape_.block_size *
                           shape_.num_kv_heads * shape_.head_dim;
  auto* base = static_cast<char*>(pool_.data()) + 2 * index * per_pool * element_size(dtype_);
  const std::initializer_list<int64_t> dims = {shape_.num_blocks, shape_.block_size,
                                               shape_.num_kv_heads, shape_.head_dim};
  return KvLayerView{Tensor(base, dtype_, dims),
                     Tensor(base + per_pool * element_size(dtype_), dtype_, dims)};
}

}  // namespace tessera
