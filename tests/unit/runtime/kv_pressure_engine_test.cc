// The engine under KV-cache pressure over the fake model, counted in engine steps (never in
// time): how many steps a stream waits between two of its tokens when more is asked of the KV
// cache than it holds, and that every request still ends with the tokens greedy decoding gives.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/runtime/engine_harness.h"

namespace tessera {
namespace {

using testing::expected_tokens;
using testing::Harness;
using testing::prompt_of;

struct Load {
  int32_t prompt_len;
  int32_t max_tokens;
};

struct PressureRun {
  int64_t preemptions = 0;
  int max_gap = 0;  // most steps between two tokens of one request
  size_t finished = 0;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, std::vector<int32_t>> want;
};

// `streams` clients, each sending the next of its requests the step after its last one finished
// (a closed loop; one request each is a burst), over `num_blocks` blocks of 16 tokens. The step
// of every token is recorded.
PressureRun run_clients(int32_t num_blocks, const std::vector<std::vector<Load>>& streams,
                        EngineConfig config) {
  Harness h(num_blocks, 16, ForwardLimits{256, 32}, config);
  PressureRun run;
  struct Client {
    const std::vector<Load>* loads;
    size_t sent = 0;
    RequestHandle handle;
    int last_token_step = -1;
    bool active = false;
  };
  std::vector<Client> clients;
  for (const std::vector<Load>& loads : streams) {
    clients.emplace_back();
    clients.back().loads = &loads;
  }
  int seed = 0;
  auto send = [&](Client& c) {
    const Load& load = (*c.loads)[c.sent++];
    auto r = h.request(prompt_of(load.prompt_len, seed++), load.max_tokens);
    run.want[r->id] = expected_tokens(r->prompt, load.max_tokens);
    c.handle = *h.engine.submit(r);
    c.last_token_step = -1;
    c.active = true;
  };
  for (Client& c : clients) send(c);
  for (int step = 0; step < 100000; ++step) {
    if (std::none_of(clients.begin(), clients.end(), [](const Client& c) { return c.active; })) {
      break;
    }
    h.engine.step();
    for (Client& c : clients) {
      if (!c.active) continue;
      while (auto out = c.handle.stream->try_next()) {
        if (!out->token_ids.empty()) {
          if (c.last_token_step >= 0) run.max_gap = std::max(run.max_gap, step - c.last_token_step);
          c.last_token_step = step;
        }
        std::vector<int32_t>& t = run.tokens[c.handle.request->id];
        t.insert(t.end(), out->token_ids.begin(), out->token_ids.end());
        if (out->finished) {
          c.active = false;
          ++run.finished;
        }
      }
      if (!c.active && c.sent < c.loads->size()) send(c);
    }
  }
  run.preemptions = h.engine.stats().preemptions_total.load();
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
  EXPECT_EQ(run.finished, run.want.size());
  for (const auto& [id, want] : run.want) EXPECT_EQ(run.tokens[id], want) << "request " << id;
  return run;
}

EngineConfig headroom(int32_t steps) {
  EngineConfig config;
  config.admission_headroom_steps = steps;
  return config;
}

TEST(KvPressure, NoStreamWaitsAStepWhenTheHeadroomCoversEveryOutput) {
  // A burst of 12 requests of 20-64 prompt tokens that generate 16 tokens each (the default
  // headroom), over 16 blocks of 16 tokens: about twice what fits at once.
  std::vector<std::vector<Load>> burst;
  for (int i = 0; i < 12; ++i) burst.push_back({Load{20 + i * 4, 16}});
  const PressureRun with = run_clients(16, burst, EngineConfig());
  EXPECT_EQ(with.preemptions, 0);
  EXPECT_EQ(with.max_gap, 1);
  // Without the watermark every prompt that fits is admitted, the pool runs dry as they decode,
  // and preempted streams wait for others to finish.
  const PressureRun without = run_clients(16, burst, headroom(0));
  EXPECT_GT(without.preemptions, 0);
  EXPECT_GT(without.max_gap, 1);
}

TEST(KvPressure, HeadroomForTheLongestOutputNeverStallsAClosedLoop) {
  // 8 clients, 4 requests each, of 32-79 prompt tokens and 96-159 output tokens, over 64 blocks
  // of 16: about 1.5 times what fits. With room held for every whole output, sequences wait in
  // the queue instead of being preempted mid-stream: a token every step for every stream.
  std::vector<std::vector<Load>> loop(8);
  for (int n = 0; n < 32; ++n) loop[n % 8].push_back(Load{32 + n * 5 % 48, 96 + n * 7 % 64});
  const PressureRun held = run_clients(64, loop, headroom(160));
  EXPECT_EQ(held.preemptions, 0);
  EXPECT_EQ(held.max_gap, 1);
  // The default headroom (16 steps) cannot see that far: streams are preempted and stall.
  const PressureRun by_default = run_clients(64, loop, EngineConfig());
  EXPECT_GT(by_default.preemptions, 0);
  EXPECT_GT(by_default.max_gap, 1);
}

TEST(KvPressure, AClosedLoopBeyondThePoolServesEveryRequest) {
  // 8 clients, 4 requests each, of 32-79 prompt tokens and 96-159 output tokens, over 64 blocks
  // of 16: about 1.5 times what fits. Outputs outgrow the headroom, so streams are preempted;
  // every request still finishes with its own tokens, none starves.
  std::vector<std::vector<Load>> loop(8);
  for (int n = 0; n < 32; ++n) loop[n % 8].push_back(Load{32 + n * 5 % 48, 96 + n * 7 % 64});
  for (const bool caching : {false, true}) {
    SCOPED_TRACE(caching);
    EngineConfig config;
    config.enable_prefix_caching = caching;
    const PressureRun run = run_clients(64, loop, config);
    EXPECT_GT(run.preemptions, 0);
  }
}

}  // namespace
}  // namespace tessera
