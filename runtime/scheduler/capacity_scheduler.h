// Who fits in KV memory: keeps running sequences supplied with blocks (preempting, by recompute,
// the one that costs least to recompute when blocks run out) and admits waiting sequences in
// arrival order while their tokens fit with headroom to spare. First come, first served: a
// waiting sequence that does not fit blocks those behind it, and a preempted sequence goes back
// to the front of the queue (in arrival order), so no request starves.
//
// Admission keeps a watermark: a sequence is admitted only while the blocks left free after it
// cover every running sequence's next `headroom_steps` decode tokens (its own included; fewer
// when max_tokens ends it sooner), so that running sequences rarely run dry. Why room in decode
// steps rather than vLLM's fraction of the pool (1%): it is what a running stream needs, and it
// scales with the batch -- 16 steps at 16-token blocks is one block per sequence, about vLLM's 1%
// at 256 streams on an H100-sized pool, but never 0 blocks on a small pool. When every request's
// output fits in the headroom, no running sequence ever runs dry. No watermark applies to a
// sequence admitted alone (Engine::submit refuses one that needs more than the pool) or to one
// that streamed tokens before it was preempted: that is running work coming back, first in line.
//
// When blocks do run out, the victim is the running sequence whose preemption loses the fewest
// computed blocks -- those its tokens fill that the prefix cache does not hold (a preempted
// sequence's cached blocks stay cached, evictable, and it takes them back when it returns) --
// ties going to the newest. The oldest running sequence is never the victim while another runs:
// it always makes progress, so every sequence eventually runs to its end.
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

struct CapacityConfig {
  int32_t block_size = 16;
  int32_t max_num_seqs = 256;
  bool enable_prefix_caching = true;
  // Decode tokens every running sequence must still have room for, in free blocks, after an
  // admission; 0 admits whenever the tokens fit.
  int32_t headroom_steps = 16;
};

class CapacityScheduler {
 public:
  CapacityScheduler(BlockAllocator& allocator, CapacityConfig config)
      : allocator_(allocator), config_(config) {}

  // `running` is in arrival order (and is left so); `waiting` too, preempted sequences going back
  // to its front.
  CapacityDecision schedule(std::deque<Sequence*>& waiting, std::vector<Sequence*>& running);

  // After a step advanced `seq.num_computed`: its full blocks computed by now go into the prefix
  // cache (nothing with prefix caching off).
  void cache_computed_blocks(Sequence& seq);

  // Blocks a sequence of `num_tokens` tokens occupies.
  int32_t blocks_for(int32_t num_tokens) const {
    return (num_tokens + config_.block_size - 1) / config_.block_size;
  }
  // Blocks of K/V `seq` has computed that preemption would lose: those its computed tokens fill,
  // less its leading blocks the prefix cache holds. A partial block is never cached, so a
  // decoding sequence whose full blocks are all cached costs at most 1.
  int32_t recompute_cost(const Sequence& seq) const;
  // Blocks `seq` needs for its next headroom_steps decode tokens (fewer when its max_tokens
  // ends it sooner) beyond those its tokens fill: what the watermark keeps free for it.
  int32_t headroom_blocks(const Sequence& seq) const;

 private:
  // Gives a waiting sequence its cached prefix and blocks for the rest of its tokens if that
  // leaves `keep_free` blocks free; false (and no change) otherwise.
  bool admit(Sequence& seq, int32_t keep_free, CapacityDecision& decision);
  // The running sequence to preempt (an index into `running`).
  size_t choose_victim(const std::vector<Sequence*>& running) const;
  void preempt(Sequence* seq, std::deque<Sequence*>& waiting);

  BlockAllocator& allocator_;
  CapacityConfig config_;
};

}  // namespace tessera
