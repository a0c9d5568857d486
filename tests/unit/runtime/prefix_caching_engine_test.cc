// Prefix caching in the engine over the fake model: requests that share a prefix get the tokens
// they get without the cache while prefilling only the rest; shared blocks under preemption and
// cancellation; chunked prefill after a cached prefix; the reset job; the stats.
#include <future>
#include <map>

#include <gtest/gtest.h>

#include "tests/unit/runtime/engine_harness.h"

namespace tessera {
namespace {

// Engine::reset_prefix_cache's answer as a future (its callback runs on the engine thread).
std::future<int32_t> reset(Engine& engine) {
  auto dropped = std::make_shared<std::promise<int32_t>>();
  std::future<int32_t> answer = dropped->get_future();
  engine.reset_prefix_cache([dropped](int32_t n) { dropped->set_value(n); });
  return answer;
}

using testing::expected_tokens;
using testing::Harness;
using testing::prompt_of;
using testing::tokens_of;

EngineConfig caching(bool on) {
  EngineConfig config;
  config.enable_prefix_caching = on;
  return config;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What a harness holds once everything has finished: no block in use, and every cached block
// evictable.
void expect_only_evictable_blocks_left(const Harness& h) {
  const BlockAllocator& a = h.cache->allocator();
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_cached(), a.num_evictable());
  EXPECT_EQ(h.engine.stats().prefix_cache_blocks.load(), a.num_cached());
  EXPECT_EQ(h.model.writes_into_cached_blocks, 0);
}

struct SharedPrefixRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  int64_t tokens_run = 0;
  int64_t queries = 0;
  int64_t hits = 0;
};

// 24 requests: a 37-token prefix and suffixes of 0..22 tokens, in three waves (the next wave
// submitted while the one before is still running), each checked against greedy decoding.
SharedPrefixRun run_shared_prefix(bool caching_on) {
  Harness h(256, 4, ForwardLimits{64, 16}, caching(caching_on));
  const std::vector<int32_t> prefix = prompt_of(37, 5);
  std::vector<RequestHandle> handles;
  std::map<std::string, std::vector<int32_t>> want;
  for (int wave = 0; wave < 3; ++wave) {
    for (int i = 0; i < 8; ++i) {
      const int n = wave * 8 + i;
      auto r = h.request(concat(prefix, prompt_of(n, n)), 3 + n % 7);
      want[r->id] = expected_tokens(r->prompt, r->stop.max_tokens);
      handles.push_back(*h.engine.submit(r));
    }
    for (int s = 0; s < 3; ++s) h.engine.step();
  }
  SharedPrefixRun run;
  for (auto& [id, outs] : h.drain(handles)) {
    run.tokens[id] = tokens_of(outs);
    EXPECT_EQ(run.tokens[id], want[id]) << "request " << id;
  }
  EXPECT_EQ(run.tokens.size(), want.size());
  expect_only_evictable_blocks_left(h);
  run.tokens_run = h.model.tokens_run;
  run.queries = h.engine.stats().prefix_cache_queries_total.load();
  run.hits = h.engine.stats().prefix_cache_hits_total.load();
  return run;
}

TEST(PrefixCaching, ASharedPrefixGivesTheSameTokensWithTheCacheOnAndOff) {
  const SharedPrefixRun on = run_shared_prefix(true);
  const SharedPrefixRun off = run_shared_prefix(false);
  EXPECT_EQ(on.tokens, off.tokens);
  // Every request after the first wave finds at least the prefix's 9 full blocks.
  EXPECT_GE(on.hits, 16 * 36);
  EXPECT_LE(on.hits, on.queries);
  EXPECT_EQ(on.tokens_run, off.tokens_run - on.hits);  // hits are never prefilled
  EXPECT_EQ(off.hits, 0);
  EXPECT_EQ(off.queries, 0);
}

TEST(PrefixCaching, ChunkedPrefillOfALongPromptStartsAfterItsCachedPrefix) {
  // 16 tokens a step: the 200-token prompts prefill in chunks.
  Harness h(128, 4, ForwardLimits{16, 8});
  const std::vector<int32_t> first_prompt = prompt_of(200, 1);
  auto first = h.request(first_prompt, 5);
  h.drain({*h.engine.submit(first)});
  const int64_t tokens_before = h.model.tokens_run;
  EXPECT_EQ(tokens_before, 200 + 4);

  // The first 161 tokens are the same: 40 full blocks (160 tokens) are cached.
  std::vector<int32_t> second_prompt(first_prompt.begin(), first_prompt.begin() + 161);
  second_prompt = concat(second_prompt, prompt_of(39, 9));
  auto second = h.request(second_prompt, 5);
  auto outs = h.drain({*h.engine.submit(second)});
  EXPECT_EQ(tokens_of(outs[second->id]), expected_tokens(second_prompt, 5));
  EXPECT_EQ(h.engine.stats().prefix_cache_hits_total.load(), 160);
  EXPECT_EQ(h.engine.stats().prefix_cache_queries_total.load(), 400);
  EXPECT_EQ(h.model.tokens_run - tokens_before, 40 + 4);  // the rest of the prompt, then decode
  EXPECT_LE(h.model.max_tokens_seen, 16);
  expect_only_evictable_blocks_left(h);
}

TEST(PrefixCaching, BlocksSharedByTwoRunningSequencesStayUntilBothFinish) {
  Harness h(64, 4, ForwardLimits{64, 8});
  const std::vector<int32_t> prompt = prompt_of(21, 2);  // 5 full blocks
  auto longer = h.request(prompt, 30);
  RequestHandle longer_handle = *h.engine.submit(longer);
  h.engine.step();  // prefilled: its 5 blocks are cached while it runs
  ASSERT_EQ(h.cache->allocator().num_cached(), 5);
  auto shorter = h.request(concat(prompt, {'z'}), 2);
  RequestHandle shorter_handle = *h.engine.submit(shorter);
  h.engine.step();
  const std::vector<int32_t> shared = {0, 1, 2, 3, 4};  // blocks handed out from 0
  for (int32_t b : shared) EXPECT_EQ(h.cache->allocator().refcount(b), 2) << "block " << b;
  auto outs = h.drain({shorter_handle});
  EXPECT_EQ(tokens_of(outs[shorter->id]), expected_tokens(concat(prompt, {'z'}), 2));
  for (int32_t b : shared) EXPECT_EQ(h.cache->allocator().refcount(b), 1) << "block " << b;
  EXPECT_GT(h.cache->allocator().num_used(), 5);  // and the longer one's own blocks
  outs = h.drain({longer_handle});
  EXPECT_EQ(tokens_of(outs[longer->id]), expected_tokens(prompt, 30));
  expect_only_evictable_blocks_left(h);
  EXPECT_EQ(h.engine.stats().prefix_cache_hits_total.load(), 20);
}

TEST(PrefixCaching, APreemptedSequenceRecomputesOnlyWhatTheCacheLost) {
  // 10 blocks of 4 tokens: two 16-token prompts that generate 8 and 16 tokens cannot both run to
  // the end; the newer is preempted, and when it returns its own full blocks are still cached.
  // No admission watermark: it would keep the newer waiting instead.
  EngineConfig config;
  config.admission_headroom_steps = 0;
  Harness h(10, 4, ForwardLimits{64, 8}, config);
  auto older = h.request(prompt_of(16, 1), 8);
  auto newer = h.request(prompt_of(16, 2), 16);
  auto outs = h.drain({*h.engine.submit(older), *h.engine.submit(newer)});
  EXPECT_GT(h.engine.stats().preemptions_total.load(), 0);
  EXPECT_EQ(tokens_of(outs[older->id]), expected_tokens(older->prompt, 8));
  EXPECT_EQ(tokens_of(outs[newer->id]), expected_tokens(newer->prompt, 16));
  // The prompts share nothing: every hit is the preempted sequence finding its own blocks.
  EXPECT_GT(h.engine.stats().prefix_cache_hits_total.load(), 0);
  expect_only_evictable_blocks_left(h);
}

TEST(PrefixCaching, PreemptionUnderPressureWithSharedPrefixesKeepsOutputsCorrect) {
  Harness h(24, 4, ForwardLimits{64, 16});
  const std::vector<int32_t> prefix = prompt_of(12, 7);
  std::vector<RequestHandle> handles;
  std::map<std::string, std::vector<int32_t>> want;
  for (int i = 0; i < 16; ++i) {
    auto r = h.request(concat(prefix, prompt_of(1 + i, i)), 30);
    want[r->id] = expected_tokens(r->prompt, 30);
    handles.push_back(*h.engine.submit(r));
    h.engine.step();
  }
  auto outs = h.drain(handles);
  EXPECT_GT(h.engine.stats().preemptions_total.load(), 0);
  EXPECT_GT(h.engine.stats().prefix_cache_hits_total.load(), 0);
  for (auto& [id, o] : outs) EXPECT_EQ(tokens_of(o), want[id]) << "request " << id;
  expect_only_evictable_blocks_left(h);
}

TEST(PrefixCaching, ACancelledRequestsComputedBlocksStayCachedForTheNext) {
  Harness h(64, 4, ForwardLimits{8, 8});
  const std::vector<int32_t> prompt = prompt_of(40, 3);
  auto cancelled = h.request(prompt, 10);
  RequestHandle handle = *h.engine.submit(cancelled);
  for (int i = 0; i < 3; ++i) h.engine.step();  // 24 of 40 prompt tokens: 6 full blocks
  handle.cancel();
  auto outs = h.drain({handle});
  EXPECT_EQ(outs[cancelled->id].back().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(h.cache->allocator().num_cached(), 6);
  expect_only_evictable_blocks_left(h);

  auto next = h.request(prompt, 10);
  outs = h.drain({*h.engine.submit(next)});
  EXPECT_EQ(tokens_of(outs[next->id]), expected_tokens(prompt, 10));
  EXPECT_EQ(h.engine.stats().prefix_cache_hits_total.load(), 24);
  expect_only_evictable_blocks_left(h);
}

TEST(PrefixCaching, ResetRunsOnTheEngineThreadAndDropsEveryCachedBlock) {
  Harness h(64, 4, ForwardLimits{64, 8});
  const std::vector<int32_t> prompt = prompt_of(30, 4);
  h.drain({*h.engine.submit(h.request(prompt, 6))});
  const int32_t cached = h.cache->allocator().num_cached();
  EXPECT_EQ(cached, 8);  // 35 computed tokens of 36: 8 full blocks
  std::future<int32_t> dropped = reset(h.engine);
  // Nothing happens off the engine thread: the job waits for the next step.
  EXPECT_EQ(dropped.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(h.cache->allocator().num_cached(), cached);
  EXPECT_FALSE(h.engine.step());
  EXPECT_EQ(dropped.get(), cached);
  EXPECT_EQ(h.cache->allocator().num_cached(), 0);
  EXPECT_EQ(h.engine.stats().prefix_cache_blocks.load(), 0);
  h.drain({*h.engine.submit(h.request(prompt, 6))});
  EXPECT_EQ(h.engine.stats().prefix_cache_hits_total.load(), 0);

  // A started engine wakes up for it; a shut-down one answers 0.
  h.engine.start();
  EXPECT_EQ(reset(h.engine).get(), 8);
  h.engine.shutdown(absl::CancelledError("test over"));
  EXPECT_EQ(reset(h.engine).get(), 0);
}

TEST(PrefixCaching, OffKeepsNothingAndCountsNothing) {
  Harness h(64, 4, ForwardLimits{64, 8}, caching(false));
  const std::vector<int32_t> prompt = prompt_of(30, 4);
  for (int i = 0; i < 2; ++i) {
    auto r = h.request(prompt, 6);
    auto outs = h.drain({*h.engine.submit(r)});
    EXPECT_EQ(tokens_of(outs[r->id]), expected_tokens(prompt, 6));
  }
  EXPECT_EQ(h.model.tokens_run, 2 * (30 + 5));
  EXPECT_EQ(h.cache->allocator().num_cached(), 0);
  EXPECT_EQ(h.engine.stats().prefix_cache_queries_total.load(), 0);
  EXPECT_EQ(h.engine.stats().prefix_cache_hits_total.load(), 0);
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
}

}  // namespace
}  // namespace tessera
