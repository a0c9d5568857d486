// The engine over the fake model, stepped on the test's thread: a harness that submits requests
// and drains their streams, prompts, and the tokens greedy decoding must give.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "tests/unit/runtime/fake_model.h"

namespace tessera::testing {

struct Harness {
  Harness(int32_t num_blocks, int32_t block_size, ForwardLimits limits, EngineConfig config = {},
          int eos_modulus = 0, std::chrono::microseconds delay = {})
      : tokenizer(make_byte_tokenizer()),
        model(limits, eos_modulus, delay),
        cache(*KvCache::create(backend, fake_cache_shape(num_blocks, block_size))),
        engine(model, *cache, *tokenizer, config) {}

  std::shared_ptr<Request> request(std::vector<int32_t> prompt, int32_t max_tokens) {
    auto r = std::make_shared<Request>();
    r->id = std::to_string(next_id++);
    r->prompt = std::move(prompt);
    r->sampling.temperature = 0;
    r->stop.max_tokens = max_tokens;
    return r;
  }

  // Drives the engine on this thread until every handle has finished; returns the outputs.
  std::map<std::string, std::vector<RequestOutput>> drain(const std::vector<RequestHandle>& handles) {
    std::map<std::string, std::vector<RequestOutput>> outs;
    size_t done = 0;
    for (int guard = 0; done < handles.size() && guard < 100000; ++guard) {
      engine.step();
      for (const RequestHandle& h : handles) {
        while (auto o = h.stream->try_next()) {
          if (o->finished) {
            ++done;
            finish_order.push_back(h.request->id);
          }
          outs[h.request->id].push_back(*std::move(o));
        }
      }
    }
    return outs;
  }

  CpuBackend backend{1};
  std::unique_ptr<Tokenizer> tokenizer;
  FakeModel model;
  std::unique_ptr<KvCache> cache;
  Engine engine;
  int next_id = 0;
  std::vector<std::string> finish_order;
};

inline std::vector<int32_t> prompt_of(int n, int seed) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back('a' + (i * 7 + seed) % 26);
  return p;
}

// What greedy decoding with the fake model must produce, computed without any engine.
inline std::vector<int32_t> expected_tokens(std::vector<int32_t> context, int max_tokens, int eos_modulus = 0) {
  std::vector<int32_t> out;
  while (static_cast<int>(out.size()) < max_tokens) {
    const int32_t t = FakeModel::next_token(context, eos_modulus);
    out.push_back(t);
    context.push_back(t);
    if (t == kFakeEos) break;
  }
  return out;
}

inline std::vector<int32_t> tokens_of(const std::vector<RequestOutput>& outs) {
  std::vector<int32_t> t;
  for (const auto& o : outs) t.insert(t.end(), o.token_ids.begin(), o.token_ids.end());
  return t;
}

}  // namespace tessera::testing
