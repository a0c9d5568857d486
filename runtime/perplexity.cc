#include "runtime/perplexity.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/backend/sampling_math.h"

namespace tessera {

namespace {

// -log softmax(row)[target], in double.
double negative_log_likelihood(std::span<const float> row, int32_t target) {
  return log_sum_exp(row.data(), row.size()) - static_cast<double>(row[target]);
}

bool all_finite(std::span<const float> row) {
  return std::all_of(row.begin(), row.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace

absl::StatusOr<PerplexityResult> perplexity(ForwardModel& model, KvCache& cache,
                                            std::span<const int32_t> ids,
                                            const PerplexityOptions& options) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("perplexity needs at least 2 tokens; the text has ", n));
  }
  if (options.context < 2 || options.stride < 1 || options.stride > options.context) {
    return absl::InvalidArgumentError(
        absl::StrCat("perplexity: context ", options.context, " and stride ", options.stride,
                     ": the context must be at least 2 tokens and the stride 1 .. context"));
  }
  const int64_t vocab = model.vocab_size();
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("perplexity: token ", i, " is id ", ids[i],
                                                     ", outside the vocabulary of ", vocab));
    }
  }
  // A chunk of a window: at most the step's tokens, each of whose rows may need logits.
  const int32_t chunk =
      std::max(1, std::min(model.limits().max_batch_tokens, model.limits().max_logit_rows));
  const int32_t block_size = cache.block_size();
  std::vector<float> logits;
  PerplexityResult result;
  result.tokens = n;
  int64_t scored_until = 1;  // tokens [1, scored_until) are scored
  for (int64_t begin = 0; scored_until < n; begin += options.stride) {
    const int64_t end = std::min(n, begin + options.context);
    const int32_t len = static_cast<int32_t>(end - begin);
    BlockTable table;
    if (!table.reserve(len, block_size, cache.allocator())) {
      return absl::ResourceExhaustedError(
          absl::StrCat("perplexity: a window of ", len, " tokens does not fit the KV cache (",
                       cache.allocator().num_free(), " free blocks of ", block_size, " tokens)"));
    }
    absl::Status status;
    for (int32_t first = 0; first < len && status.ok(); first += chunk) {
      const int32_t count = std::min(chunk, len - first);
      StepBatch batch = sequence_chunk(table, block_size, ids.subspan(begin), first, count);
      for (int32_t p = first; p < first + count; ++p) {
        // Row p predicts token begin + p + 1: scored here when no earlier window did.
        const int64_t target = begin + p + 1;
        if (target >= scored_until && target < end) batch.logits_rows.push_back(p - first);
      }
      logits.resize(batch.logits_rows.size() * static_cast<size_t>(vocab));
      status = model.forward(batch, cache, logits);
      for (size_t r = 0; r < batch.logits_rows.size() && status.ok(); ++r) {
        const int64_t target = begin + first + batch.logits_rows[r] + 1;
        const std::span<const float> row(logits.data() + r * vocab, static_cast<size_t>(vocab));
        if (!all_finite(row)) {
          status = absl::InternalError(absl::StrCat(
              "perplexity: non-finite logits predicting token ", target, " (window at ", begin, ")"));
          break;
        }
        result.total_nll += negative_log_likelihood(row, ids[target]);
        ++result.scored;
      }
    }
    table.release(cache.allocator());
    TESSERA_RETURN_IF_ERROR(status);
    ++result.windows;
    scored_until = end;
  }
  return result;
}

}  // namespace tessera
