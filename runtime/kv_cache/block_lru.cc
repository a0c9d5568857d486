#include "runtime/kv_cache/block_lru.h"

#include <cassert>

namespace tessera {

BlockLru::BlockLru(int32_t num_blocks)
    : sentinel_(num_blocks), prev_(num_blocks + 1, kAbsent), next_(num_blocks + 1, kAbsent) {
  prev_[sentinel_] = sentinel_;
  next_[sentinel_] = sentinel_;
}

void BlockLru::push_back(int32_t block) {
  assert(!contains(block));
  const int32_t last = prev_[sentinel_];
  prev_[block] = last;
  next_[block] = sentinel_;
  next_[last] = block;
  prev_[sentinel_] = block;
  ++size_;
}

void BlockLru::remove(int32_t block) {
  assert(contains(block));
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  prev_[block] = kAbsent;
  next_[block] = kAbsent;
  --size_;
}

}  // namespace tessera
