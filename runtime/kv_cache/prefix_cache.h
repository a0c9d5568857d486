// The prefix cache's index: which physical blocks hold the K/V of which full blocks of tokens,
// found by their chain hash (block_hash.h). Blocks themselves -- refcounts, the free list, the
// evictable LRU -- are the BlockAllocator's; this is the map it keeps beside them.
//
// Every registration is an entry with a number never given out again. An entry records its
// block's token ids and its parent's entry number, and a lookup matches only when both are
// equal to the query's: by induction from the first block, a matched entry stands for exactly
// the query's tokens up to and including its block, whatever the hashes do. Comparing token ids
// alone would not be enough: if two different parents collided, the child of one would pass for
// the child of the other. Numbers are never reused, so an entry whose parent has been evicted or
// dropped can never match again (a later registration under its hash replaces it).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "runtime/kv_cache/block_hash.h"

namespace tessera {

// A registered block: the entry's number and the block that holds it.
struct CachedBlock {
  uint64_t entry = 0;  // 0 is no entry (and the parent of every first block)
  int32_t block = -1;
};

// How far one sequence's leading full blocks are known to the cache: each registered, or found
// equal to a registered one. The next block's entry links to `last`.
struct CachedChain {
  int32_t num_blocks = 0;
  CachedBlock last;
};

class PrefixCache {
 public:
  PrefixCache(int32_t num_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  // Blocks that hold an entry, in use or not.
  int32_t size() const { return static_cast<int32_t>(by_hash_.size()); }
  bool holds(int32_t block) const { return entry_[block] != 0; }
  // The entry is still the one its block holds (not evicted, replaced or reset since).
  bool is_live(const CachedBlock& cached) const {
    return cached.block >= 0 && entry_[cached.block] == cached.entry;
  }

  // The entry under `hash` whose tokens and parent are `block_tokens` and `parent_entry`.
  std::optional<CachedBlock> find(BlockHash hash, std::span<const int32_t> block_tokens,
                                  uint64_t parent_entry) const;
  // The block registered under `hash`, whatever it holds.
  std::optional<int32_t> block_under(BlockHash hash) const;

  // Registers `block` (holding no entry) under `hash`, which no block may hold yet.
  CachedBlock insert(int32_t block, BlockHash hash, std::span<const int32_t> block_tokens,
                     uint64_t parent_entry);
  // Drops the entry `block` holds.
  void erase(int32_t block);

 private:
  int32_t block_size_;
  uint64_t next_entry_ = 1;
  std::unordered_map<BlockHash, int32_t> by_hash_;  // hash -> block
  std::vector<uint64_t> entry_;          // [num_blocks]: its entry's number, 0 when none
  std::vector<uint64_t> parent_entry_;   // [num_blocks]
  std::vector<BlockHash> hash_;          // [num_blocks]
  std::vector<int32_t> tokens_;          // [num_blocks, block_size]: each entry's token ids
};

}  // namespace tessera
