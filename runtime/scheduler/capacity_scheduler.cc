#include "runtime/scheduler/capacity_scheduler.h"

#include <algorithm>

namespace tessera {

int32_t CapacityScheduler::recompute_cost(const Sequence& seq) const {
  const std::vector<int32_t>& blocks = seq.blocks.blocks();
  const int32_t computed = std::min(blocks_for(seq.num_computed), seq.blocks.num_blocks());
  int32_t cached = 0;
  while (cached < computed && allocator_.prefix_cache().holds(blocks[cached])) ++cached;
  return computed - cached;
}

int32_t CapacityScheduler::headroom_blocks(const Sequence& seq) const {
  const int32_t num_tokens = static_cast<int32_t>(seq.tokens.size());
  // Room is held for every token but the last one sampled, which is never fed back: the
  // sequence's last slot is at prompt + max_tokens - 1.
  const int32_t left = seq.request->stop.max_tokens - seq.generated() - 1;
  const int32_t steps = std::clamp(left, 0, config_.headroom_steps);
  return blocks_for(num_tokens + steps) - blocks_for(num_tokens);
}

size_t CapacityScheduler::choose_victim(const std::vector<Sequence*>& running) const {
  // running[0] is the oldest: spared while any other sequence runs, so that it always advances.
  if (running.size() == 1) return 0;
  size_t victim = 1;
  int32_t victim_cost = recompute_cost(*running[1]);
  for (size_t i = 2; i < running.size(); ++i) {
    const int32_t cost = recompute_cost(*running[i]);
    // `running` is in arrival order: on a tie the later one, the newest, goes.
    if (cost <= victim_cost) {
      victim = i;
      victim_cost = cost;
    }
  }
  return victim;
}

void CapacityScheduler::preempt(Sequence* seq, std::deque<Sequence*>& waiting) {
  // Recompute: the blocks go, the tokens stay. Released last block first, the cached ones stay
  // in the prefix cache (evictable, tail before head), so re-admission prefills only what was
  // evicted meanwhile, and the partial last block.
  seq->blocks.release(allocator_);
  seq->num_computed = 0;
  seq->cached = {};
  // Keep `waiting` in arrival order: every sequence that ever ran arrived before any that never
  // did, so a preempted sequence returns ahead of every new arrival, oldest first.
  auto pos = std::find_if(waiting.begin(), waiting.end(), [&](const Sequence* w) {
    return w->arrival_order > seq->arrival_order;
  });
  waiting.insert(pos, seq);
}

CapacityDecision CapacityScheduler::schedule(std::deque<Sequence*>& waiting,
                                             std::vector<Sequence*>& running) {
  CapacityDecision decision;
  // 1. Every running sequence needs room for all of its tokens (the next decode token
  //    included). Oldest first; when blocks run out, preempt the cheapest to recompute.
  for (size_t i = 0; i < running.size();) {
    Sequence* seq = running[i];
    const int32_t needed = static_cast<int32_t>(seq->tokens.size());
    bool gone = false;
    while (!seq->blocks.reserve(needed, config_.block_size, allocator_)) {
      const size_t v = choose_victim(running);
      Sequence* victim = running[v];
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(v));
      preempt(victim, waiting);
      decision.preempted.push_back(victim);
      if (victim == seq) {
        gone = true;
        break;
      }
      if (v < i) --i;
    }
    if (!gone) ++i;
  }
  // 2. Admit in arrival order while the whole sequence so far fits (its cached prefix shared)
  //    above the watermark; nothing when memory was short this step. A preempted sequence that
  //    had streamed tokens is running work coming back, not new work: it needs only room for its
  //    tokens, so that its stream resumes as soon as they fit.
  int32_t keep_free = 0;
  for (const Sequence* seq : running) keep_free += headroom_blocks(*seq);
  while (!waiting.empty() && decision.preempted.empty() &&
         static_cast<int32_t>(running.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting.front();
    const int32_t own = headroom_blocks(*seq);
    const bool resuming = running.empty() || seq->generated() > 0;
    if (!admit(*seq, resuming ? 0 : keep_free + own, decision)) break;
    keep_free += own;
    waiting.pop_front();
    running.push_back(seq);
    decision.admitted.push_back(seq);
  }
  // `running` stays in arrival order: the oldest is spared, prefill chunks go oldest first.
  std::sort(running.begin(), running.end(), [](const Sequence* a, const Sequence* b) {
    return a->arrival_order < b->arrival_order;
  });
  return decision;
}

bool CapacityScheduler::admit(Sequence& seq, int32_t keep_free, CapacityDecision& decision) {
  const int32_t num_tokens = static_cast<int32_t>(seq.tokens.size());
  PrefixMatch match;
  if (config_.enable_prefix_caching) {
    extend_block_hashes(seq.tokens, config_.block_size, seq.block_hashes);
    // The last token is never taken from the cache: its logits are what the sequence samples.
    match = allocator_.match_prefix(seq.tokens, seq.block_hashes,
                                    (num_tokens - 1) / config_.block_size);
  }
  const int32_t num_matched = static_cast<int32_t>(match.blocks.size());
  // Evictable blocks of the match count as free until the sequence takes them.
  if (blocks_for(num_tokens) - num_matched + keep_free >
      allocator_.num_free() - match.num_evictable) {
    return false;
  }
  seq.blocks.share(match.blocks, allocator_);
  seq.blocks.reserve(num_tokens, config_.block_size, allocator_);  // fits: checked above
  seq.num_computed = num_matched * config_.block_size;
  seq.cached = match.chain;
  if (config_.enable_prefix_caching) {
    decision.prefix_query_tokens += num_tokens;
    decision.prefix_hit_tokens += seq.num_computed;
  }
  return true;
}

void CapacityScheduler::cache_computed_blocks(Sequence& seq) {
  if (!config_.enable_prefix_caching) return;
  const int32_t num_full = seq.num_computed / config_.block_size;
  if (num_full <= seq.cached.num_blocks) return;
  extend_block_hashes(seq.tokens, config_.block_size, seq.block_hashes);
  allocator_.cache_blocks(seq.tokens, seq.block_hashes, seq.blocks.blocks(), num_full, seq.cached);
}

}  // namespace tessera
