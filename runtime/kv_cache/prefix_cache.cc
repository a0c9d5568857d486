#include "runtime/kv_cache/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace tessera {

PrefixCache::PrefixCache(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      entry_(num_blocks, 0),
      parent_entry_(num_blocks, 0),
      hash_(num_blocks, 0),
      tokens_(static_cast<size_t>(num_blocks) * block_size, 0) {}

std::optional<CachedBlock> PrefixCache::find(BlockHash hash, std::span<const int32_t> block_tokens,
                                             uint64_t parent_entry) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const int32_t block = it->second;
  const auto stored = std::span<const int32_t>(tokens_).subspan(
      static_cast<size_t>(block) * block_size_, block_size_);
  if (parent_entry_[block] != parent_entry ||
      !std::equal(stored.begin(), stored.end(), block_tokens.begin(), block_tokens.end())) {
    return std::nullopt;
  }
  return CachedBlock{entry_[block], block};
}

std::optional<int32_t> PrefixCache::block_under(BlockHash hash) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

CachedBlock PrefixCache::insert(int32_t block, BlockHash hash,
                                std::span<const int32_t> block_tokens, uint64_t parent_entry) {
  assert(!holds(block) && !by_hash_.contains(hash));
  assert(static_cast<int32_t>(block_tokens.size()) == block_size_);
  by_hash_.emplace(hash, block);
  entry_[block] = next_entry_++;
  parent_entry_[block] = parent_entry;
  hash_[block] = hash;
  std::copy(block_tokens.begin(), block_tokens.end(),
            tokens_.begin() + static_cast<size_t>(block) * block_size_);
  return CachedBlock{entry_[block], block};
}

void PrefixCache::erase(int32_t block) {
  assert(holds(block));
  by_hash_.erase(hash_[block]);
  entry_[block] = 0;
}

}  // namespace tessera
