// CapacityScheduler on its own, over a BlockAllocator: the admission watermark, a preempted
// sequence's return ahead of new arrivals, the victim chosen by what it costs to recompute (ties
// to the newest, the oldest spared), and cached blocks outliving their preempted sequence.
#include "runtime/scheduler/capacity_scheduler.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/runtime/fake_model.h"

namespace tessera {
namespace {

using testing::make_byte_tokenizer;

// Sequences, the two queues, and an engine step without a model: every running sequence
// computes all it has pending and then appends one sampled token.
class Pool {
 public:
  Pool(int32_t num_blocks, CapacityConfig config)
      : config_(config), allocator_(num_blocks, config.block_size), scheduler_(allocator_, config) {}

  Sequence* arrive(int32_t prompt_len, int32_t max_tokens, int32_t seed = 0) {
    return arrive_as(next_order_++, prompt_len, max_tokens, seed);
  }

  // Arrives with the given arrival order (the engine's order of submission).
  Sequence* arrive_as(uint64_t order, int32_t prompt_len, int32_t max_tokens, int32_t seed) {
    auto request = std::make_shared<Request>();
    for (int32_t i = 0; i < prompt_len; ++i) request->prompt.push_back('a' + (i * 7 + seed) % 26);
    request->stop.max_tokens = max_tokens;
    RequestHandle handle{request, std::make_shared<OutputStream>()};
    sequences_.push_back(std::make_unique<Sequence>(handle, *tokenizer_, order));
    waiting.push_back(sequences_.back().get());
    return sequences_.back().get();
  }

  CapacityDecision schedule() { return scheduler_.schedule(waiting, running); }

  // The step after schedule(): the K/V of every running sequence's tokens computed (full blocks
  // cached), then a token sampled.
  void compute() {
    for (Sequence* seq : running) {
      seq->num_computed = static_cast<int32_t>(seq->tokens.size());
      scheduler_.cache_computed_blocks(*seq);
      seq->tokens.push_back('z');
    }
  }

  CapacityDecision step() {
    CapacityDecision d = schedule();
    compute();
    return d;
  }

  void finish(Sequence* seq) {
    seq->blocks.release(allocator_);
    running.erase(std::find(running.begin(), running.end(), seq));
  }

  bool is_running(const Sequence* seq) const {
    return std::find(running.begin(), running.end(), seq) != running.end();
  }

  BlockAllocator& allocator() { return allocator_; }
  CapacityScheduler& scheduler() { return scheduler_; }

  std::deque<Sequence*> waiting;
  std::vector<Sequence*> running;

 private:
  CapacityConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_ = make_byte_tokenizer();
  BlockAllocator allocator_;
  CapacityScheduler scheduler_;
  std::vector<std::unique_ptr<Sequence>> sequences_;
  uint64_t next_order_ = 0;
};

CapacityConfig config(int32_t headroom_steps, bool prefix_caching = false) {
  CapacityConfig c;
  c.block_size = 4;
  c.max_num_seqs = 64;
  c.enable_prefix_caching = prefix_caching;
  c.headroom_steps = headroom_steps;
  return c;
}

TEST(CapacityScheduler, HeadroomIsTheNextDecodeTokensBlocksUpToMaxTokens) {
  Pool p(64, config(8));
  Sequence* at_boundary = p.arrive(8, 100);  // 8 more tokens: 2 more blocks of 4
  Sequence* mid_block = p.arrive(9, 100);    // 9 -> 17 tokens: 3 -> 5 blocks
  Sequence* short_output = p.arrive(8, 3);   // 2 more tokens are ever fed back: 1 block
  Sequence* one_token = p.arrive(8, 1);      // nothing is ever fed back
  EXPECT_EQ(p.scheduler().headroom_blocks(*at_boundary), 2);
  EXPECT_EQ(p.scheduler().headroom_blocks(*mid_block), 2);
  EXPECT_EQ(p.scheduler().headroom_blocks(*short_output), 1);
  EXPECT_EQ(p.scheduler().headroom_blocks(*one_token), 0);
  Pool none(64, config(0));
  EXPECT_EQ(none.scheduler().headroom_blocks(*none.arrive(9, 100)), 0);
}

TEST(CapacityScheduler, AdmitsANewSequenceOnlyWhileTheWatermarkStaysFree) {
  for (const int32_t headroom : {0, 4}) {
    SCOPED_TRACE(headroom);
    // 10 blocks of 4. The first sequence runs alone: no watermark, it may take what it needs.
    Pool p(10, config(headroom));
    Sequence* first = p.arrive(20, 8);  // 5 blocks; 4 decode steps more need 1 block
    EXPECT_EQ(p.step().admitted.size(), 1u);
    EXPECT_EQ(p.allocator().num_free(), 5);  // 21 tokens: 6 blocks after its first decode step
    // 13 tokens need 4 blocks and leave 1 free: enough for the first's next 3 tokens but not for
    // 4 steps of both (1 block each).
    Sequence* second = p.arrive(13, 8);
    p.schedule();
    EXPECT_EQ(p.is_running(second), headroom == 0);
    EXPECT_TRUE(p.is_running(first));
    if (headroom == 0) continue;
    // Once the first finishes, the second runs alone.
    p.finish(first);
    p.schedule();
    EXPECT_TRUE(p.is_running(second));
  }
}

TEST(CapacityScheduler, AWatermarkCoveringEveryOutputNeverPreempts) {
  // 24 blocks of 4, twelve requests of 6-17 prompt tokens that generate 8 tokens each: far more
  // than fits at once. With 8 steps of headroom every admitted sequence has room for all it will
  // generate; without it the pool runs dry.
  for (const int32_t headroom : {0, 8}) {
    SCOPED_TRACE(headroom);
    Pool p(24, config(headroom));
    for (int i = 0; i < 12; ++i) p.arrive(6 + i, 8, i);
    int64_t preempted = 0;
    int finished = 0;
    for (int step = 0; step < 1000 && finished < 12; ++step) {
      preempted += static_cast<int64_t>(p.step().preempted.size());
      for (Sequence* seq : std::vector<Sequence*>(p.running)) {
        if (seq->generated() == seq->request->stop.max_tokens) {
          p.finish(seq);
          ++finished;
        }
      }
    }
    EXPECT_EQ(finished, 12);
    if (headroom == 0) {
      EXPECT_GT(preempted, 0);
    } else {
      EXPECT_EQ(preempted, 0);
    }
  }
}

TEST(CapacityScheduler, APreemptedSequenceReturnsBeforeNewArrivals) {
  // 8 blocks of 4; two 8-token prompts that generate 20 tokens each cannot both finish.
  Pool p(8, config(0));
  Sequence* older = p.arrive(8, 20, 1);
  Sequence* newer = p.arrive(8, 20, 2);
  Sequence* victim = nullptr;
  for (int step = 0; step < 100 && !victim; ++step) {
    const CapacityDecision d = p.step();
    if (!d.preempted.empty()) victim = d.preempted.front();
  }
  ASSERT_EQ(victim, newer);  // the oldest is spared
  ASSERT_EQ(p.waiting.front(), newer);
  // A new arrival that fits where the preempted one does not still waits behind it.
  Sequence* arrival = p.arrive(1, 4, 3);
  for (int step = 0; step < 100 && older->generated() < 20; ++step) {
    p.step();
    EXPECT_FALSE(p.is_running(arrival)) << "step " << step;
  }
  p.finish(older);
  const CapacityDecision d = p.schedule();
  ASSERT_EQ(d.admitted.size(), 2u);
  EXPECT_EQ(d.admitted[0], newer);
  EXPECT_EQ(d.admitted[1], arrival);
}

TEST(CapacityScheduler, PreemptsWhatCostsLeastToRecomputeTiesToTheNewest) {
  // Prefix caching off: a sequence's cost is every block its computed tokens fill.
  Pool p(16, config(0));
  Sequence* oldest = p.arrive(1, 100, 0);  // the cheapest, but spared
  Sequence* cheap = p.arrive(4, 100, 1);   // 2 blocks computed after its first step
  Sequence* costly = p.arrive(15, 100, 2); // 4 blocks
  p.step();
  EXPECT_EQ(p.scheduler().recompute_cost(*cheap), 1);
  EXPECT_EQ(p.scheduler().recompute_cost(*costly), 4);
  Sequence* victim = nullptr;
  for (int step = 0; step < 100 && !victim; ++step) {
    const CapacityDecision d = p.step();
    if (!d.preempted.empty()) victim = d.preempted.front();
  }
  EXPECT_EQ(victim, cheap);
  EXPECT_TRUE(p.is_running(oldest));
  EXPECT_TRUE(p.is_running(costly));

  // Equal costs: the newest goes.
  Pool q(12, config(0));
  q.arrive(4, 100, 0);
  Sequence* middle = q.arrive(4, 100, 1);
  Sequence* newest = q.arrive(4, 100, 2);
  victim = nullptr;
  for (int step = 0; step < 100 && !victim; ++step) {
    const CapacityDecision d = q.step();
    if (!d.preempted.empty()) victim = d.preempted.front();
  }
  EXPECT_EQ(victim, newest);
  EXPECT_TRUE(q.is_running(middle));
}

TEST(CapacityScheduler, CachedBlocksMakeASequenceCheapAndOutliveItsPreemption) {
  Pool p(16, config(0, /*prefix_caching=*/true));
  Sequence* oldest = p.arrive_as(0, 4, 100, 0);
  Sequence* costly = p.arrive_as(2, 12, 100, 2);  // the newest
  p.step();
  // A reset leaves the running sequences' blocks uncached for good.
  p.allocator().drop_cached();
  Sequence* cached = p.arrive_as(1, 12, 100, 1);  // admitted after it, but older
  p.step();
  EXPECT_EQ(p.scheduler().recompute_cost(*costly), 4);  // 13 tokens computed, none cached
  EXPECT_EQ(p.scheduler().recompute_cost(*cached), 0);  // 12 tokens computed: 3 blocks, cached
  Sequence* victim = nullptr;
  for (int step = 0; step < 100 && !victim; ++step) {
    const CapacityDecision d = p.step();
    if (!d.preempted.empty()) victim = d.preempted.front();
  }
  ASSERT_EQ(victim, cached);
  EXPECT_TRUE(p.is_running(oldest));
  EXPECT_TRUE(p.is_running(costly));
  // Its full blocks stayed in the prefix cache, evictable; when room comes back it takes them
  // again and prefills only the rest.
  EXPECT_GT(p.allocator().num_evictable(), 0);
  p.finish(costly);
  const CapacityDecision back = p.schedule();
  ASSERT_EQ(back.admitted.size(), 1u);
  EXPECT_EQ(back.admitted[0], cached);
  EXPECT_GE(back.prefix_hit_tokens, 12);
  EXPECT_GE(cached->num_computed, 12);
}

TEST(CapacityScheduler, APreemptedStreamReturnsAsSoonAsItsTokensFit) {
  // The watermark holds back new work only: a preempted sequence that had streamed tokens comes
  // back the first step its tokens fit, whatever headroom the others would want.
  Pool p(14, config(8));
  for (int i = 0; i < 4; ++i) p.arrive(3 + i, 30, i);
  int64_t preempted = 0, resumed = 0;
  int finished = 0;
  for (int step = 0; step < 1000 && finished < 4; ++step) {
    const CapacityDecision d = p.step();
    preempted += static_cast<int64_t>(d.preempted.size());
    for (const Sequence* seq : d.admitted) resumed += seq->generated() > 1;
    if (d.preempted.empty() && !p.waiting.empty() && p.waiting.front()->generated() > 0) {
      const Sequence& front = *p.waiting.front();
      EXPECT_GT(p.scheduler().blocks_for(static_cast<int32_t>(front.tokens.size())),
                p.allocator().num_free())
          << "step " << step << ": a preempted stream that fits was kept waiting";
    }
    for (Sequence* seq : std::vector<Sequence*>(p.running)) {
      if (seq->generated() == seq->request->stop.max_tokens) {
        p.finish(seq);
        ++finished;
      }
    }
  }
  EXPECT_EQ(finished, 4);
  EXPECT_GT(preempted, 0);
  EXPECT_GT(resumed, 0);
}

TEST(CapacityScheduler, TheOldestRunningSequenceIsNeverTheVictim) {
  // The oldest costs least (a 1-token prompt) yet runs every step to its end while newer ones
  // with long prompts are preempted, come back, and are preempted again.
  Pool p(12, config(0));
  Sequence* oldest = p.arrive(1, 40, 0);
  for (int i = 1; i <= 4; ++i) p.arrive(12, 30, i);
  int64_t preempted = 0;
  for (int step = 0; step < 40; ++step) {
    const CapacityDecision d = p.step();
    preempted += static_cast<int64_t>(d.preempted.size());
    ASSERT_TRUE(p.is_running(oldest)) << "step " << step;
    ASSERT_EQ(oldest->generated(), step + 1);
  }
  EXPECT_GT(preempted, 0);
}

}  // namespace
}  // namespace tessera
