// The evictable blocks in least-recently-used order: cached blocks no sequence holds, kept for
// later hits until the allocator needs them. A list threaded through two arrays indexed by block
// id, so that a hit takes a block out of the middle in O(1) and nothing allocates.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

class BlockLru {
 public:
  explicit BlockLru(int32_t num_blocks);

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(int32_t block) const { return next_[block] != kAbsent; }
  // The least recently used block (the next to evict); the list must not be empty.
  int32_t front() const { return next_[sentinel_]; }
  // Adds `block` (not in the list) as the most recently used.
  void push_back(int32_t block);
  void remove(int32_t block);

 private:
  static constexpr int32_t kAbsent = -1;
  int32_t sentinel_;           // index num_blocks: the list's head and tail
  std::vector<int32_t> prev_;  // [num_blocks + 1]
  std::vector<int32_t> next_;  // [num_blocks + 1]: kAbsent for blocks not in the list
  int32_t size_ = 0;
};

}  // namespace tessera
