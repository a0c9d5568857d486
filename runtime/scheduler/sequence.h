// The engine's state for one request: its tokens so far, how many are in the KV cache, its
// blocks (and how far the prefix cache knows them) and sampler, and its output side (the
// OutputProcessor's). Owned and touched by the engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/kv_cache/block_hash.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/kv_cache/prefix_cache.h"
#include "runtime/output/sequence_output.h"
#include "runtime/request/request.h"
#include "runtime/request/sampler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct Sequence {
  Sequence(const RequestHandle& handle, const Tokenizer& tokenizer, uint64_t order)
      : request(handle.request),
        tokens(request->prompt),
        prompt_len(static_cast<int32_t>(request->prompt.size())),
        arrival_order(order),
        sampler(request->sampling, request->prompt),
        output(handle, tokenizer) {}

  std::shared_ptr<Request> request;
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int32_t prompt_len;
  uint64_t arrival_order;       // FCFS order; also "newest" for preemption
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  BlockTable blocks;
  std::vector<BlockHash> block_hashes;  // [full blocks of tokens hashed so far]: the hash chain
  CachedChain cached;           // leading blocks known to the prefix cache (reset on preemption)
  Sampler sampler;
  SequenceOutput output;

  int32_t generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  // Tokens still to run through the model before the next sample (1 while decoding).
  int32_t pending() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
  bool prefilling() const { return pending() > 1; }
};

}  // namespace tessera
