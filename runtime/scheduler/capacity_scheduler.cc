#include "runtime/scheduler/capacity_scheduler.h"

#include <algorithm>

namespace tessera {

void CapacityScheduler::preempt(Sequence* seq, std::deque<Sequence*>& waiting) {
  // Recompute: the blocks go, the tokens stay; re-admission prefills them all again.
  seq->blocks.release(allocator_);
  seq->num_computed = 0;
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
  // 2. Admit in arrival order while the whole sequence so far fits.
  while (!waiting.empty() && static_cast<int32_t>(running.size()) < max_num_seqs_) {
    Sequence* seq = waiting.front();
    if (!decision.preempted.empty()) break;  // memory is short this step: admit nothing
    if (!seq->blocks.reserve(static_cast<int32_t>(seq->tokens.size()), block_size_, allocator_))
      break;
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

}  // namespace tessera
