#include "runtime/scheduler/capacity_scheduler.h"

#include <algorithm>

namespace tessera {

void CapacityScheduler::preempt(Sequence* seq, std::deque<Sequence*>& waiting) {
  // Recompute: the blocks go, the tokens stay; re-admission prefills them again, all but those
  // still in the prefix cache.
  seq->blocks.release(allocator_);
  seq->num_computed = 0;
  seq->cached = {};
  // Keep `waiting` in arrival order so that the oldest preempted sequence returns first.
  auto pos = std::find_if(waiting.begin(), waiting.end(), [&](const Sequence* w) {
    return w->arrival_order > seq->arrival_order;
  });
  waiting.insert(pos, seq);
}

CapacityDecision CapacityScheduler::schedule(std::deque<Sequence*>& waiting,
                                             std::vector<Sequence*>& running) {
  CapacityDecision decision;
  // 1. Every running sequence needs room for all of its tokens (the next decode token
  //    included). Oldest first; when blocks run out, evict from the newest end.
  for (size_t i = 0; i < running.size(); ++i) {
    Sequence* seq = running[i];
    const int32_t needed = static_cast<int32_t>(seq->tokens.size());
    while (!seq->blocks.reserve(needed, block_size_, allocator_)) {
      Sequence* victim = running.back();
      running.pop_back();
      preempt(victim, waiting);
      decision.preempted.push_back(victim);
      if (victim == seq) break;
    }
    if (i >= running.size()) break;  // `seq` itself was the victim
  }
  // 2. Admit in arrival order while the whole sequence so far fits (its cached prefix shared).
  while (!waiting.empty() && static_cast<int32_t>(running.size()) < max_num_seqs_) {
    Sequence* seq = waiting.front();
    if (!decision.preempted.empty()) break;  // memory is short this step: admit nothing
    if (!admit(*seq, decision)) break;
    waiting.pop_front();
    running.push_back(seq);
    decision.admitted.push_back(seq);
  }
  // `running` stays in arrival order so that preemption always takes the newest.
  std::sort(running.begin(), running.end(), [](const Sequence* a, const Sequence* b) {
    return a->arrival_order < b->arrival_order;
  });
  return decision;
}

bool CapacityScheduler::admit(Sequence& seq, CapacityDecision& decision) {
  const int32_t num_tokens = static_cast<int32_t>(seq.tokens.size());
  PrefixMatch match;
  if (enable_prefix_caching_) {
    extend_block_hashes(seq.tokens, block_size_, seq.block_hashes);
    // The last token is never taken from the cache: its logits are what the sequence samples.
    match = allocator_.match_prefix(seq.tokens, seq.block_hashes, (num_tokens - 1) / block_size_);
  }
  const int32_t num_matched = static_cast<int32_t>(match.blocks.size());
  // Evictable blocks of the match count as free until the sequence takes them.
  if (blocks_for(num_tokens) - num_matched > allocator_.num_free() - match.num_evictable) {
    return false;
  }
  seq.blocks.share(match.blocks, allocator_);
  seq.blocks.reserve(num_tokens, block_size_, allocator_);  // fits: checked above
  seq.num_computed = num_matched * block_size_;
  seq.cached = match.chain;
  if (enable_prefix_caching_) {
    decision.prefix_query_tokens += num_tokens;
    decision.prefix_hit_tokens += seq.num_computed;
  }
  return true;
}

void CapacityScheduler::cache_computed_blocks(Sequence& seq) {
  if (!enable_prefix_caching_) return;
  const int32_t num_full = seq.num_computed / block_size_;
  if (num_full <= seq.cached.num_blocks) return;
  extend_block_hashes(seq.tokens, block_size_, seq.block_hashes);
  allocator_.cache_blocks(seq.tokens, seq.block_hashes, seq.blocks.blocks(), num_full, seq.cached);
}

}  // namespace tessera
