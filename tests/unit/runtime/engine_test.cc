// The engine over a fake model: continuous batching, chunked prefill, preemption by recompute,
// cancellation, deadlines, queue limits, stop conditions.
#include "runtime/engine.h"

#include <algorithm>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/runtime/engine_harness.h"

namespace tessera {
namespace {

using testing::expected_tokens;
using testing::FakeModel;
using testing::Harness;
using testing::kFakeEos;
using testing::prompt_of;
using testing::tokens_of;

TEST(Engine, ConcurrentRequestsGetTheirOwnCorrectTokens) {
  Harness h(256, 4, ForwardLimits{64, 32});
  std::vector<RequestHandle> handles;
  std::map<std::string, std::vector<int32_t>> want;
  for (int i = 0; i < 40; ++i) {
    auto r = h.request(prompt_of(1 + i * 3 % 50, i), 1 + i % 17);
    want[r->id] = expected_tokens(r->prompt, r->stop.max_tokens);
    handles.push_back(*h.engine.submit(r));
  }
  auto outs = h.drain(handles);
  ASSERT_EQ(outs.size(), handles.size());
  for (auto& [id, o] : outs) {
    EXPECT_EQ(tokens_of(o), want[id]) << "request " << id;
    EXPECT_EQ(o.back().finish_reason, FinishReason::kLength);
    EXPECT_EQ(o.back().completion_tokens, static_cast<int>(want[id].size()));
    std::string text;
    for (const auto& piece : o) text += piece.text;
    EXPECT_EQ(text, std::string(want[id].begin(), want[id].end()));
  }
  EXPECT_LE(h.model.max_tokens_seen, 64);  // the token budget holds
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
  EXPECT_TRUE(h.engine.idle());
}

TEST(Engine, ShortRequestAfterLongOneFinishesFirst) {
  Harness h(256, 16, ForwardLimits{32, 8});
  auto long_req = h.request(prompt_of(200, 1), 50);
  auto short_req = h.request(prompt_of(5, 2), 3);
  std::vector<RequestHandle> handles = {*h.engine.submit(long_req)};
  h.engine.step();  // the long one is admitted and starts prefilling in chunks
  handles.push_back(*h.engine.submit(short_req));
  h.drain(handles);
  ASSERT_EQ(h.finish_order.size(), 2u);
  EXPECT_EQ(h.finish_order[0], short_req->id);
}

TEST(Engine, PreemptionUnderMemoryPressureKeepsOutputsCorrect) {
  // 24 blocks of 4 tokens: far less than 16 sequences of up to 60 tokens need at once.
  Harness h(24, 4, ForwardLimits{64, 16});
  std::vector<RequestHandle> handles;
  std::map<std::string, std::vector<int32_t>> want;
  for (int i = 0; i < 16; ++i) {
    auto r = h.request(prompt_of(10 + i, i), 40);
    want[r->id] = expected_tokens(r->prompt, 40);
    handles.push_back(*h.engine.submit(r));
  }
  auto outs = h.drain(handles);
  EXPECT_GT(h.engine.stats().preemptions_total.load(), 0);
  for (auto& [id, o] : outs) EXPECT_EQ(tokens_of(o), want[id]) << "request " << id;
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
}

TEST(Engine, CancelledRequestsFreeTheirBlocks) {
  Harness h(512, 4, ForwardLimits{128, 64});
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 100; ++i) handles.push_back(*h.engine.submit(h.request(prompt_of(8, i), 200)));
  for (int i = 0; i < 5; ++i) h.engine.step();
  EXPECT_GT(h.cache->allocator().num_used(), 0);
  for (auto& handle : handles) handle.cancel();
  auto outs = h.drain(handles);
  for (auto& [id, o] : outs) {
    EXPECT_EQ(o.back().finish_reason, FinishReason::kCancelled);
    EXPECT_EQ(o.back().status.code(), absl::StatusCode::kCancelled);
  }
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
  EXPECT_TRUE(h.engine.idle());
}

TEST(Engine, DeadlineEndsTheRequestWithDeadlineExceeded) {
  Harness h(64, 4, ForwardLimits{32, 8});
  auto r = h.request(prompt_of(4, 0), 200);
  r->deadline = Clock::now() + std::chrono::milliseconds(5);
  auto handle = *h.engine.submit(r);
  h.engine.step();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto outs = h.drain({handle});
  const RequestOutput& last = outs[r->id].back();
  EXPECT_EQ(last.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(last.completion_tokens, 200);
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
}

TEST(Engine, RejectsWhatCanNeverFitAndAFullQueue) {
  EngineConfig config;
  config.max_queue = 2;
  config.max_model_len = 100;
  Harness h(10, 4, ForwardLimits{32, 8}, config);
  auto too_long = h.engine.submit(h.request(prompt_of(90, 0), 20));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("100"), absl::string_view::npos);
  auto too_big_for_cache = h.engine.submit(h.request(prompt_of(30, 0), 20));  // 50 > 40 slots
  EXPECT_EQ(too_big_for_cache.status().code(), absl::StatusCode::kOutOfRange);
  auto bad_token = h.engine.submit(h.request({5000}, 1));
  EXPECT_EQ(bad_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.engine.submit(h.request({}, 1)).status().code(), absl::StatusCode::kInvalidArgument);
  auto biased = h.request(prompt_of(3, 0), 1);
  biased->sampling.logit_bias = {{5000, 1.0f}};
  auto bad_bias = h.engine.submit(biased);
  EXPECT_EQ(bad_bias.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_bias.status().message().find("logit_bias: token id 5000"), absl::string_view::npos);
  ASSERT_TRUE(h.engine.submit(h.request(prompt_of(3, 0), 1)).ok());
  ASSERT_TRUE(h.engine.submit(h.request(prompt_of(3, 1), 1)).ok());
  auto full = h.engine.submit(h.request(prompt_of(3, 2), 1));
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("2"), absl::string_view::npos);
  h.engine.stop_admitting();
  EXPECT_EQ(h.engine.submit(h.request(prompt_of(3, 3), 1)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(Engine, StopsOnEosStopTokensAndStopStrings) {
  const int eos_mod = 7;
  Harness h(256, 4, ForwardLimits{64, 16}, {}, eos_mod);
  // Find a prompt whose greedy continuation hits <eos> within 30 tokens.
  std::vector<int32_t> prompt;
  std::vector<int32_t> want;
  for (int seed = 0; seed < 100; ++seed) {
    prompt = prompt_of(6, seed);
    want = expected_tokens(prompt, 30, eos_mod);
    if (want.back() == kFakeEos && want.size() > 3) break;
  }
  ASSERT_EQ(want.back(), kFakeEos);
  auto eos = h.request(prompt, 30);
  auto ignore = h.request(prompt, 30);
  ignore->stop.ignore_eos = true;
  auto min_tokens = h.request(prompt, 30);
  min_tokens->stop.min_tokens = static_cast<int32_t>(want.size()) + 2;
  auto stop_id = h.request(prompt, 30);
  stop_id->stop.stop_token_ids = {want[1]};
  auto stop_str = h.request(prompt, 30);
  stop_str->stop.stop_strings = {std::string(1, static_cast<char>(want[2]))};
  auto outs = h.drain({*h.engine.submit(eos), *h.engine.submit(ignore), *h.engine.submit(min_tokens),
                       *h.engine.submit(stop_id), *h.engine.submit(stop_str)});
  EXPECT_EQ(outs[eos->id].back().finish_reason, FinishReason::kEos);
  EXPECT_EQ(tokens_of(outs[eos->id]), want);
  EXPECT_EQ(outs[ignore->id].back().finish_reason, FinishReason::kLength);
  EXPECT_EQ(outs[ignore->id].back().completion_tokens, 30);
  EXPECT_GT(outs[min_tokens->id].back().completion_tokens, static_cast<int>(want.size()));
  EXPECT_EQ(outs[stop_id->id].back().finish_reason, FinishReason::kStop);
  EXPECT_EQ(outs[stop_id->id].back().completion_tokens, 2);
  EXPECT_EQ(outs[stop_str->id].back().finish_reason, FinishReason::kStop);
  std::string text;
  for (const auto& o : outs[stop_str->id]) text += o.text;
  EXPECT_EQ(text, std::string(want.begin(), want.begin() + 2));
}

TEST(Engine, StopStringsDoNotApplyBeforeMinTokens) {
  Harness h(64, 4, ForwardLimits{32, 8});
  const std::vector<int32_t> prompt = prompt_of(6, 3);
  const std::vector<int32_t> want = expected_tokens(prompt, 4);
  auto r = h.request(prompt, 4);
  r->stop.min_tokens = 4;
  r->stop.stop_strings = {std::string(1, static_cast<char>(want[0]))};  // hit by the first token
  auto outs = h.drain({*h.engine.submit(r)});
  std::string text;
  for (const auto& o : outs[r->id]) text += o.text;
  EXPECT_EQ(outs[r->id].back().finish_reason, FinishReason::kLength);
  EXPECT_EQ(text, std::string(want.begin(), want.end()));  // nothing cut, nothing lost
}

struct CountingObserver : EngineObserver {
  void on_step(const StepReport& s) override {
    ++steps;
    tokens += s.num_tokens;
    EXPECT_EQ(s.num_tokens, s.prefill_tokens + s.decode_tokens);
  }
  void on_first_token(double ttft) override { ++first_tokens; }
  void on_inter_token(double seconds) override { ++inter_tokens; }
  void on_finish(const FinishReport& r) override {
    ++finished;
    completion_tokens += r.completion_tokens;
    EXPECT_GE(r.total_seconds, r.ttft_seconds);
  }
  int steps = 0, tokens = 0, first_tokens = 0, inter_tokens = 0, finished = 0, completion_tokens = 0;
};

TEST(Engine, ObserverSeesStepsTokensAndFinishes) {
  Harness h(256, 4, ForwardLimits{64, 16});
  CountingObserver observer;
  h.engine.set_observer(&observer);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) handles.push_back(*h.engine.submit(h.request(prompt_of(5 + i, i), 4 + i)));
  h.drain(handles);
  EXPECT_EQ(observer.finished, 6);
  EXPECT_EQ(observer.first_tokens, 6);
  EXPECT_EQ(observer.completion_tokens, 4 + 5 + 6 + 7 + 8 + 9);
  EXPECT_EQ(observer.inter_tokens, observer.completion_tokens - 6);
  EXPECT_EQ(observer.steps, h.engine.stats().steps_total.load());
  EXPECT_EQ(observer.tokens, (5 + 6 + 7 + 8 + 9 + 10) + observer.completion_tokens - 6);
}

struct PhaseObserver : EngineObserver {
  void on_step(const StepReport& s) override { reports.push_back(s); }
  std::vector<StepReport> reports;
};

TEST(Engine, StepReportSaysWhereTheTimeWent) {
  Harness h(256, 4, ForwardLimits{64, 16}, {}, 0, std::chrono::microseconds(300));
  PhaseObserver observer;
  h.engine.set_observer(&observer);
  h.drain({*h.engine.submit(h.request(prompt_of(6, 1), 4)), *h.engine.submit(h.request(prompt_of(9, 2), 3))});
  ASSERT_EQ(observer.reports.size(), static_cast<size_t>(h.engine.stats().steps_total.load()));
  for (const StepReport& s : observer.reports) {
    EXPECT_DOUBLE_EQ(s.device_wait_seconds, 300e-6);  // what the model said it waited
    EXPECT_GE(s.schedule_seconds, 0);
    EXPECT_GE(s.launch_seconds, 0);
    EXPECT_GE(s.update_seconds, 0);
    EXPECT_GE(s.overlapped_seconds, 0);
    // launch + overlapped + device_wait is the forward, update follows it: together within the
    // step's time.
    EXPECT_LE(s.launch_seconds + s.overlapped_seconds + s.device_wait_seconds + s.update_seconds,
              s.seconds + 1e-9);
    EXPECT_GE(s.seconds, s.device_wait_seconds);
  }
}

// A step's outputs of requests that go on are held, and sent while the next step runs on the
// device: inside the model's forward where it overlaps host work (a device model, after queuing
// the step), else just before it.
TEST(Engine, AStepsOutputsReachTheirStreamsWhileTheNextStepRuns) {
  for (const bool device : {false, true}) {
    SCOPED_TRACE(device ? "model overlaps host work" : "model computes on the host");
    Harness h(64, 4, ForwardLimits{64, 16});
    h.model.takes_overlapped_work = device;
    auto r = h.request(prompt_of(5, 1), 3);
    RequestHandle handle = *h.engine.submit(r);
    ASSERT_TRUE(h.engine.step());  // the prompt, and the first token sampled
    EXPECT_FALSE(handle.stream->try_next().has_value()) << "held until the next step runs";
    std::optional<RequestOutput> during;
    h.model.on_forward = [&] { during = handle.stream->try_next(); };
    ASSERT_TRUE(h.engine.step());
    h.model.on_forward = nullptr;
    ASSERT_TRUE(during.has_value()) << "sent by the time the second step computes";
    EXPECT_FALSE(during->finished);
    ASSERT_EQ(during->token_ids.size(), 1u);
    auto outs = h.drain({handle});
    std::vector<int32_t> tokens = during->token_ids;
    for (const RequestOutput& o : outs[r->id]) {
      tokens.insert(tokens.end(), o.token_ids.begin(), o.token_ids.end());
    }
    EXPECT_EQ(tokens, expected_tokens(r->prompt, 3));
    EXPECT_TRUE(outs[r->id].back().finished);
  }
}

// A request finished outside a step's update (cancelled here) gets its held output before its
// final message.
TEST(Engine, ACancelledRequestsHeldOutputComesBeforeItsLastMessage) {
  Harness h(64, 4, ForwardLimits{64, 16});
  h.model.takes_overlapped_work = true;
  auto r = h.request(prompt_of(5, 2), 10);
  RequestHandle handle = *h.engine.submit(r);
  ASSERT_TRUE(h.engine.step());  // token 1, held
  ASSERT_TRUE(h.engine.step());  // token 1 sent during it; token 2 held
  std::optional<RequestOutput> first = handle.stream->try_next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token_ids.size(), 1u);
  handle.cancel();
  h.engine.step();  // the cancellation is reaped before anything runs
  // The stream merges what is unread into one message: token 2 sent after the final message
  // would be a second one.
  std::vector<RequestOutput> outs;
  while (auto o = handle.stream->try_next()) outs.push_back(*std::move(o));
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_TRUE(outs[0].finished);
  EXPECT_EQ(outs[0].finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(outs[0].token_ids.size(), 1u) << "token 2, held, then sent before the final message";
  EXPECT_EQ(outs[0].completion_tokens, 2);
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
}

TEST(Engine, BackgroundThreadServesAndShutdownFailsTheRest) {
  Harness h(256, 4, ForwardLimits{64, 16}, {}, 0, std::chrono::microseconds(200));
  h.engine.start();
  auto quick = *h.engine.submit(h.request(prompt_of(5, 1), 5));
  RequestOutput o;
  std::vector<int32_t> got;
  do {
    o = quick.stream->next();
    got.insert(got.end(), o.token_ids.begin(), o.token_ids.end());
  } while (!o.finished);
  EXPECT_EQ(got, expected_tokens(prompt_of(5, 1), 5));
  auto slow = *h.engine.submit(h.request(prompt_of(5, 2), 100000 / 1000));
  h.engine.shutdown(absl::UnavailableError("shutting down"));
  do o = slow.stream->next(); while (!o.finished);
  EXPECT_TRUE(o.status.ok() || o.status.code() == absl::StatusCode::kUnavailable);
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
}

// Seeded requests get the same tokens whether the model samples on its device (forward_sampled)
// or the engine samples on the host, and a step with one row that needs the host (logprobs here)
// sends every row of that step to the host.
struct SampledRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  int device_steps = 0;
  int steps = 0;
};

SampledRun run_seeded(bool device_sampling, bool first_wants_logprobs) {
  Harness h(256, 4, ForwardLimits{64, 16});
  h.model.spread_logits = true;
  h.model.device_sampling = device_sampling;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 8; ++i) {
    auto r = h.request(prompt_of(3 + i, i), i == 0 ? 4 : 24);
    r->sampling.temperature = 0.7f + 0.2f * (i % 4);
    r->sampling.top_k = i % 3 == 0 ? 0 : 30 * (i % 3);
    r->sampling.top_p = i % 2 == 0 ? 1.0f : 0.9f;
    r->sampling.min_p = i % 4 == 3 ? 0.01f : 0.0f;
    r->sampling.seed = 100 + i;
    r->sampling.has_seed = true;
    r->sampling.logprobs = i == 0 && first_wants_logprobs;
    r->stop.ignore_eos = true;
    handles.push_back(*h.engine.submit(r));
  }
  SampledRun run;
  for (auto& [id, outs] : h.drain(handles)) run.tokens[id] = tokens_of(outs);
  run.device_steps = h.model.sampled_steps;
  run.steps = h.model.steps;
  return run;
}

// Non-finite logits fault the engine: the request whose row sampled them fails INTERNAL saying
// so; a request still in prefill at that step and every later submit fail UNAVAILABLE with the
// fault; the listener hears it once; every KV
// block is back. On the host sampler and the device sampler alike.
void expect_non_finite_logits_fault(bool device_sampling) {
  SCOPED_TRACE(device_sampling ? "device sampling" : "host sampling");
  // 24 tokens a step: the short request samples in the first step, the long one is mid-prefill.
  Harness h(64, 4, ForwardLimits{24, 8});
  h.model.device_sampling = device_sampling;
  std::vector<absl::Status> heard;
  h.engine.set_fault_listener([&](const absl::Status& s) { heard.push_back(s); });
  auto healthy = *h.engine.submit(h.request(prompt_of(5, 1), 3));
  EXPECT_TRUE(h.drain({healthy})[healthy.request->id].back().status.ok());
  EXPECT_TRUE(h.engine.fault().ok());

  h.model.non_finite_logits = true;
  auto hit = *h.engine.submit(h.request(prompt_of(5, 2), 8));
  auto prefilling = *h.engine.submit(h.request(prompt_of(60, 3), 8));
  auto outs = h.drain({hit, prefilling});
  const RequestOutput& hit_last = outs[hit.request->id].back();
  EXPECT_EQ(hit_last.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(hit_last.status.message()),
              ::testing::HasSubstr("model fault on this request: sampling gave token id -1: the "
                                   "model's logits are not finite (NaN or inf)"));
  const RequestOutput& other_last = outs[prefilling.request->id].back();
  EXPECT_EQ(other_last.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(other_last.status.message()),
              ::testing::HasSubstr("model fault: sampling gave token id -1"));

  const absl::Status fault = h.engine.fault();
  EXPECT_EQ(fault.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(fault.message()), ::testing::HasSubstr("until restarted"));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], fault);
  absl::StatusOr<RequestHandle> later = h.engine.submit(h.request(prompt_of(5, 4), 8));
  EXPECT_EQ(later.status(), fault);
  EXPECT_EQ(h.cache->allocator().num_used(), 0);
  EXPECT_TRUE(h.engine.idle());
  EXPECT_FALSE(h.engine.step());  // nothing left to run
  EXPECT_EQ(heard.size(), 1u);
}

TEST(Engine, NonFiniteLogitsFaultTheEngine) {
  expect_non_finite_logits_fault(/*device_sampling=*/false);
  expect_non_finite_logits_fault(/*device_sampling=*/true);
}

TEST(Engine, ADeviceTokenOutsideTheVocabularyFaultsTheEngine) {
  // A device sampler that answers an impossible id ends the request with INTERNAL naming the id,
  // and faults the engine as non-finite logits do.
  Harness h(64, 4, ForwardLimits{64, 8});
  h.model.device_sampling = true;
  h.model.broken_device_token = testing::kFakeVocab + 5;
  auto bad = *h.engine.submit(h.request(prompt_of(5, 1), 8));
  auto outs = h.drain({bad});
  ASSERT_FALSE(outs[bad.request->id].empty());
  const RequestOutput& last = outs[bad.request->id].back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(last.status.message().find("token id 262, outside the vocabulary [0, 257)"),
            std::string::npos)
      << last.status;
  EXPECT_EQ(h.cache->allocator().num_used(), 0);  // its blocks are back
  EXPECT_EQ(h.engine.submit(h.request(prompt_of(5, 1), 8)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(Engine, DeviceAndHostSamplingGiveTheSameSeededTokens) {
  const SampledRun host = run_seeded(false, false);
  const SampledRun device = run_seeded(true, false);
  const SampledRun mixed = run_seeded(true, true);
  EXPECT_EQ(host.device_steps, 0);
  EXPECT_EQ(device.device_steps, device.steps);  // every step: all rows are plain
  // Request 0 (logprobs, 4 tokens) keeps the first steps on the host; the rest go to the device.
  EXPECT_GT(mixed.device_steps, 0);
  EXPECT_LT(mixed.device_steps, mixed.steps);
  ASSERT_EQ(host.tokens.size(), 8u);
  EXPECT_EQ(device.tokens, host.tokens);
  EXPECT_EQ(mixed.tokens, host.tokens);
  // The draws are really random: the tokens differ from greedy decoding of the fake model.
  int off_greedy = 0;
  for (int i = 1; i < 8; ++i) {
    const std::vector<int32_t>& got = host.tokens.at(std::to_string(i));
    std::vector<int32_t> context = prompt_of(3 + i, i);
    for (int32_t t : got) {
      off_greedy += t != FakeModel::next_token(context, 0);
      context.push_back(t);
    }
  }
  EXPECT_GT(off_greedy, 10);
}

}  // namespace
}  // namespace tessera
