// The engine's state for one request: its tokens so far, how many are in the KV cache, its
// blocks, sampler, detokenizer and stop matcher. Owned and touched by the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/kv_cache.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "runtime/stop_strings.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct Sequence {
  Sequence(RequestHandle handle, const Tokenizer& tokenizer, uint64_t order)
      : request(handle.request),
        stream(handle.stream),
        tokens(request->prompt),
        prompt_len(static_cast<int32_t>(request->prompt.size())),
        arrival_order(order),
        sampler(request->sampling, request->prompt),
        detokenizer(tokenizer),
        stop_strings(request->stop.stop_strings) {}

  std::shared_ptr<Request> request;
  std::shared_ptr<OutputStream> stream;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int32_t prompt_len;
  uint64_t arrival_order;       // FCFS order; also "newest" for preemption
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  BlockTable blocks;
  Sampler sampler;
  IncrementalDetokenizer detokenizer;
  StopStringMatcher stop_strings;
  std::optional<Clock::time_point> first_scheduled;
  std::optional<Clock::time_point> first_token;
  Clock::time_point last_token;  // when the latest token was sampled

  int32_t generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  // Tokens still to run through the model before the next sample (1 while decoding).
  int32_t pending() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
  bool prefilling() const { return pending() > 1; }
};

}  // namespace tessera
