// A model's perplexity over a token sequence, with the sliding window of transformers' guide
// "Perplexity of fixed-length models": windows of `context` tokens that start every `stride`
// tokens, each run as one sequence through the model (in chunks the model's step limits allow);
// every token after the first is scored once, in the first window that ends after it, from the
// logits of the row before it -- so with stride < context each scored token sees at least
// context - stride tokens before it; with stride == context (windows that do not overlap) a
// window's first token has no row before it and is not scored, as in the guide. Perplexity =
// exp(mean negative log-likelihood over the scored tokens).
//
// Used by `tessera perplexity` (the accuracy check of a model, its dtype or its quantization on a
// real text); the scoring is the model's fp32 logits, log-softmax in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/runner/forward_model.h"

namespace tessera {

struct PerplexityOptions {
  int32_t context = 1024;  // tokens in a window, >= 2
  int32_t stride = 512;    // tokens between windows' starts, 1 .. context
};

struct PerplexityResult {
  int64_t tokens = 0;      // the sequence's
  int64_t scored = 0;      // tokens - 1 (less a token per later window without overlap)
  int32_t windows = 0;
  double total_nll = 0;    // nats, summed over the scored tokens
  double mean_nll() const { return scored > 0 ? total_nll / static_cast<double>(scored) : 0.0; }
  double perplexity() const { return std::exp(mean_nll()); }
};

// Errors: fewer than 2 tokens, options out of range, an id outside the vocabulary, a window the
// KV cache cannot hold (naming the sizes), the model's own, a non-finite logit (naming the
// position). The cache must be otherwise unused while this runs; its blocks are returned.
absl::StatusOr<PerplexityResult> perplexity(ForwardModel& model, KvCache& cache,
                                            std::span<const int32_t> ids,
                                            const PerplexityOptions& options);

}  // namespace tessera
