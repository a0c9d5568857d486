// Who fits in KV memory: keeps running sequences supplied with blocks (preempting the newest by
// recompute when blocks run out) and admits waiting sequences in arrival order while their
// tokens fit. First come, first served: a waiting sequence that does not fit blocks those behind
// it, so no request starves.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "runtime/kv_cache/kv_cache.h"
#include "runtime/scheduler/sequence.h"

namespace tessera {

struct CapacityDecision {
  std::vector<Sequence*> admitted;   // moved from waiting to running this step
  std::vector<Sequence*> preempted;  // moved from running back to waiting (blocks freed)
};

class CapacityScheduler {
 public:
  CapacityScheduler(BlockAllocator& allocator, int32_t block_size, int32_t max_num_seqs)
      : allocator_(allocator), block_size_(block_size), max_num_seqs_(max_num_seqs) {}

  // `running` is in arrival order; `waiting` too, preempted sequences go back to its front.
  CapacityDecision schedule(std::deque<Sequence*>& waiting, std::vector<Sequence*>& running);

  // Blocks a sequence of `num_tokens` tokens occupies.
  int32_t blocks_for(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

 private:
  void preempt(Sequence* seq, std::deque<Sequence*>& waiting);

  BlockAllocator& allocator_;
  int32_t block_size_;
  int32_t max_num_seqs_;
};

}  // namespace tessera
