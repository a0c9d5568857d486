#include "runtime/kv_cache/block_allocator.h"

#include <algorithm>
#include <cassert>

namespace tessera {

BlockAllocator::BlockAllocator(int32_t num_blocks, int32_t block_size)
    : refcount_(num_blocks, 0), evictable_(num_blocks), prefix_cache_(num_blocks, block_size) {
  free_.reserve(num_blocks);
  // Highest id at the bottom of the stack so that block 0 is handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<int32_t> BlockAllocator::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    b = evictable_.front();
    evictable_.remove(b);
    prefix_cache_.erase(b);
  } else {
    return std::nullopt;
  }
  refcount_[b] = 1;
  return b;
}

void BlockAllocator::retain(int32_t block) {
  if (refcount_[block] == 0) {
    assert(evictable_.contains(block));  // a free block is allocated, never retained
    evictable_.remove(block);
  }
  ++refcount_[block];
}

void BlockAllocator::release(int32_t block) {
  assert(refcount_[block] > 0);
  if (--refcount_[block] > 0) return;
  if (prefix_cache_.holds(block)) {
    evictable_.push_back(block);
  } else {
    free_.push_back(block);
  }
}

PrefixMatch BlockAllocator::match_prefix(std::span<const int32_t> tokens,
                                         std::span<const BlockHash> hashes,
                                         int32_t max_blocks) const {
  PrefixMatch match;
  const int32_t block_size = prefix_cache_.block_size();
  const int32_t limit = std::min(max_blocks, static_cast<int32_t>(hashes.size()));
  for (int32_t i = 0; i < limit; ++i) {
    const std::optional<CachedBlock> hit = prefix_cache_.find(
        hashes[i], tokens.subspan(static_cast<size_t>(i) * block_size, block_size),
        match.chain.last.entry);
    if (!hit) break;
    match.blocks.push_back(hit->block);
    if (refcount_[hit->block] == 0) ++match.num_evictable;
    match.chain = CachedChain{i + 1, *hit};
  }
  return match;
}

void BlockAllocator::cache_blocks(std::span<const int32_t> tokens,
                                  std::span<const BlockHash> hashes,
                                  std::span<const int32_t> blocks, int32_t num_full,
                                  CachedChain& chain) {
  const int32_t block_size = prefix_cache_.block_size();
  assert(num_full <= static_cast<int32_t>(hashes.size()) &&
         num_full <= static_cast<int32_t>(blocks.size()));
  for (int32_t i = chain.num_blocks; i < num_full; ++i) {
    if (i > 0 && !prefix_cache_.is_live(chain.last)) return;
    const auto block_tokens = tokens.subspan(static_cast<size_t>(i) * block_size, block_size);
    if (std::optional<CachedBlock> same = prefix_cache_.find(hashes[i], block_tokens,
                                                             chain.last.entry)) {
      chain.last = *same;  // another sequence computed this block first
    } else {
      // The hash is taken by other contents (a collision, or a block whose parent entry is
      // gone and which nothing can reach): the newer block wins.
      if (std::optional<int32_t> other = prefix_cache_.block_under(hashes[i])) forget(*other);
      chain.last = prefix_cache_.insert(blocks[i], hashes[i], block_tokens, chain.last.entry);
    }
    chain.num_blocks = i + 1;
  }
}

int32_t BlockAllocator::drop_cached() {
  int32_t dropped = 0;
  for (int32_t b = 0; b < num_blocks(); ++b) {
    if (!prefix_cache_.holds(b)) continue;
    forget(b);
    ++dropped;
  }
  return dropped;
}

void BlockAllocator::forget(int32_t block) {
  prefix_cache_.erase(block);
  if (refcount_[block] == 0) {
    evictable_.remove(block);
    free_.push_back(block);
  }
}

}  // namespace tessera
