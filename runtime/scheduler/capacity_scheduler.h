// Who fits in KV memory: keeps running sequences supplied with blocks (preempting the newest by
// recompute when blocks run out) and admits waiting sequences in arrival order while their
// tokens fit. First come, first served: a waiting sequence that does not fit blocks those behind
// it, so no request starves.
//
// With prefix caching, a sequence admitted starts with the cached blocks its tokens begin with
// (never all of its tokens: the last one runs, for the logits it samples from), only the rest is
// prefilled, and every full block whose K/V a step computed is registered for later requests.
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
  // Prefix-cache lookups of the admitted sequences, in tokens: all of their tokens, and those
  // found cached (so not prefilled). Zero with prefix caching off.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
};

class CapacityScheduler {
 public:
  CapacityScheduler(BlockAllocator& allocator, int32_t block_size, int32_t max_num_seqs,
                    bool enable_prefix_caching)
      : allocator_(allocator),
        block_size_(block_size),
        max_num_seqs_(max_num_seqs),
        enable_prefix_caching_(enable_prefix_caching) {}

  // `running` is in arrival order; `waiting` too, preempted sequences go back to its front.
  CapacityDecision schedule(std::deque<Sequence*>& waiting, std::vector<Sequence*>& running);

  // After a step advanced `seq.num_computed`: its full blocks computed by now go into the prefix
  // cache (nothing with prefix caching off).
  void cache_computed_blocks(Sequence& seq);

  // Blocks a sequence of `num_tokens` tokens occupies.
  int32_t blocks_for(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

 private:
  // Gives a waiting sequence its cached prefix and blocks for the rest of its tokens; false (and
  // no change) when they do not fit.
  bool admit(Sequence& seq, CapacityDecision& decision);
  void preempt(Sequence* seq, std::deque<Sequence*>& waiting);

  BlockAllocator& allocator_;
  int32_t block_size_;
  int32_t max_num_seqs_;
  bool enable_prefix_caching_;
};

}  // namespace tessera
