// The pool of KV blocks: refcounts, the free list, and the prefix cache over them. A block is
// in use (refcount > 0, held by one or more sequences), free, or -- when it holds a cached full
// block's K/V that no sequence holds -- evictable: kept in an LRU for later requests whose tokens
// start the same way, and taken (its entry dropped) only once no free block is left.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/kv_cache/block_hash.h"
#include "runtime/kv_cache/block_lru.h"
#include "runtime/kv_cache/prefix_cache.h"

namespace tessera {

// The cached blocks a sequence's tokens start with.
struct PrefixMatch {
  std::vector<int32_t> blocks;  // in order: the sequence's first blocks
  int32_t num_evictable = 0;    // of them, those no sequence holds: taking them uses free blocks
  CachedChain chain;            // the sequence's chain once it holds them
};

class BlockAllocator {
 public:
  BlockAllocator(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(refcount_.size()); }
  // Blocks an allocation can get: the free ones and the evictable ones.
  int32_t num_free() const { return static_cast<int32_t>(free_.size()) + evictable_.size(); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  // Blocks that hold cached K/V, in use or evictable.
  int32_t num_cached() const { return prefix_cache_.size(); }
  int32_t num_evictable() const { return evictable_.size(); }

  // A block with refcount 1 -- a free one, else the least recently used evictable one, its
  // cache entry dropped -- or nullopt when none is left.
  std::optional<int32_t> allocate();
  // One more reference; an evictable block leaves the LRU.
  void retain(int32_t block);
  // Drops one reference; at zero a cached block becomes evictable (most recently used), any
  // other block free.
  void release(int32_t block);
  int32_t refcount(int32_t block) const { return refcount_[block]; }

  // The longest run of cached blocks, at most `max_blocks`, whose tokens are the first blocks of
  // `tokens` (`hashes`: their chain, extend_block_hashes). Nothing changes until the caller
  // retains them.
  PrefixMatch match_prefix(std::span<const int32_t> tokens, std::span<const BlockHash> hashes,
                           int32_t max_blocks) const;
  // Registers a sequence's full blocks from chain.num_blocks up to `num_full` (their K/V
  // computed; `blocks`: the sequence's block table) and advances `chain`. A block equal to one
  // already cached is not registered again; the chain links to the cached one. Once the chain's
  // last entry is gone (reset, or replaced) the sequence registers nothing more: its later
  // blocks could never be reached.
  void cache_blocks(std::span<const int32_t> tokens, std::span<const BlockHash> hashes,
                    std::span<const int32_t> blocks, int32_t num_full, CachedChain& chain);
  // Drops every cache entry (evictable blocks become free; blocks in use stay with their
  // sequences, shared with no later one); returns how many blocks held one.
  int32_t drop_cached();

  const PrefixCache& prefix_cache() const { return prefix_cache_; }

 private:
  // Drops `block`'s cache entry; an evictable block becomes free.
  void forget(int32_t block);

  std::vector<int32_t> refcount_;  // [num_blocks]
  std::vector<int32_t> free_;      // stack of free block ids (no cache entry)
  BlockLru evictable_;             // refcount 0, holding a cache entry
  PrefixCache prefix_cache_;
};

}  // namespace tessera
