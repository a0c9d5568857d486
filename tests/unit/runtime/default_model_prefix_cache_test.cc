// Prefix caching on the default model: concurrent requests that share a long prefix (a system
// prompt) get the same greedy tokens with the cache on and off, while the cache serves most of
// their prompts -- on one device, and split over two with micro-batches and decode graphs.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runner/graph_step.h"
#include "tests/unit/runtime/default_model_fixture.h"

namespace tessera {
namespace {

const std::string kSystemPrompt =
    "You are a careful assistant for a small public library. Answer in one short sentence, "
    "name the shelf where the reader can find more, and never invent a book that the library "
    "does not hold. The shelves are: history, science, poetry, cooking and travel.\n";

const std::vector<std::string> kQuestions = {
    "Where are the books about volcanoes?",
    "I want to bake bread at home.",
    "Which shelf has poems about the sea?",
    "Do you have anything on the Roman empire?",
    "Where can I read about trains in Japan?",
};

class DefaultModelPrefixCache : public DefaultModel {
 protected:
  struct Run {
    std::vector<std::vector<int32_t>> tokens;  // [round * questions + question]
    int64_t queries = 0;
    int64_t hits = 0;
    int64_t graph_steps = 0;
    int64_t micro_batched_steps = 0;
  };

  // Round 1: the first question alone until it has its first token, then the rest at once.
  // Round 2, once all have finished: every question again at once.
  static Run run(InstanceOptions options, bool prefix_caching) {
    options.engine.enable_prefix_caching = prefix_caching;
    Run r;
    auto m = load(options);
    if (!m) return r;
    std::vector<RequestHandle> handles;
    auto submit = [&](const std::string& question) {
      auto req = std::make_shared<Request>();
      req->prompt = *m->tokenizer().encode(kSystemPrompt + question);
      req->sampling = greedy();
      req->stop.max_tokens = 8;
      req->stop.ignore_eos = true;
      handles.push_back(*m->engine().submit(req));
    };
    submit(kQuestions[0]);
    while (m->engine().stats().generation_tokens_total.load() == 0) m->engine().step();
    for (size_t i = 1; i < kQuestions.size(); ++i) submit(kQuestions[i]);
    r.tokens = drain(*m, handles);
    handles.clear();
    for (const std::string& q : kQuestions) submit(q);
    for (std::vector<int32_t>& t : drain(*m, handles)) r.tokens.push_back(std::move(t));
    r.queries = m->engine().stats().prefix_cache_queries_total.load();
    r.hits = m->engine().stats().prefix_cache_hits_total.load();
    r.graph_steps = m->engine().stats().graph_steps_total.load();
    r.micro_batched_steps = m->engine().stats().micro_batched_steps_total.load();
    EXPECT_EQ(m->cache().allocator().num_used(), 0);
    return r;
  }

  // Steps until every handle has finished; their tokens, in the handles' order.
  // The cache-on run, once checked against the cache-off run.
  static Run expect_same_tokens_with_the_cache_on_and_off(const InstanceOptions& options) {
    const Run off = run(options, false);
    Run on = run(options, true);
    EXPECT_EQ(off.tokens.size(), 2 * kQuestions.size());
    EXPECT_EQ(on.tokens, off.tokens);
    EXPECT_EQ(off.hits, 0);
    // Every request but the first shares at least the system prompt's full blocks.
    EXPECT_GT(on.hits, 0);
    EXPECT_GT(static_cast<double>(on.hits) / static_cast<double>(on.queries), 0.5);
    return on;
  }
};

TEST_F(DefaultModelPrefixCache, ConcurrentRequestsGetTheSameGreedyTokensWithTheCacheOnAndOff) {
  expect_same_tokens_with_the_cache_on_and_off(small_options(32));  // prompts prefill in chunks
}

TEST_F(DefaultModelPrefixCache, TheSameOverTwoDevicesWithMicroBatchesAndDecodeGraphs) {
  InstanceOptions options = small_options(32);
  options.backend.devices = {0, 1};
  options.execution.micro_batches = 2;
  options.execution.min_micro_batch_tokens = 1;
  options.execution.decode_graphs = DecodeGraphs::kAlways;
  const Run on = expect_same_tokens_with_the_cache_on_and_off(options);
  EXPECT_GT(on.graph_steps, 0);
  EXPECT_GT(on.micro_batched_steps, 0);
}

}  // namespace
}  // namespace tessera
