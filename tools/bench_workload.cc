#include "tools/bench_workload.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tessera::cli {

namespace {

// Common English words; most are one token, with their leading space, in BPE vocabularies.
constexpr const char* kWords[] = {
    "the",    "of",     "and",     "to",     "in",       "is",    "was",   "for",        "on",
    "that",   "with",   "as",      "by",     "at",       "from",  "his",   "an",         "were",
    "are",    "which",  "this",    "be",     "has",      "or",    "had",   "first",      "one",
    "their",  "its",    "new",     "after",  "but",      "who",   "not",   "they",       "have",
    "her",    "she",    "two",     "been",   "other",    "when",  "there", "all",        "during",
    "into",   "school", "time",    "may",    "years",    "more",  "most",  "only",       "over",
    "city",   "some",   "world",   "would",  "where",    "later", "up",    "such",       "used",
    "many",   "can",    "state",   "about",  "national", "out",   "known", "university", "united",
    "then",   "made",   "between", "while",  "under",    "three", "north", "each",       "water",
    "people", "river",  "music",   "house",  "power",    "light", "small", "great",      "place",
    "field",  "system", "number",  "family", "part",     "night", "early", "second",     "long",
    "high"};
constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string random_words(size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kNumWords - 1);
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) text += ' ';
    text += kWords[pick(rng)];
  }
  return text;
}

// Words whose tokenization is `target` tokens long, or as close as a few rounds of adjusting the
// word count gets (each word is about one token). Sets `tokens` to the count reached.
absl::StatusOr<std::string> calibrated_words(int32_t target, std::mt19937_64& rng,
                                             const TokenCounter& count_tokens, int32_t& tokens) {
  constexpr int kRounds = 8;
  int64_t words = target;
  std::string best;
  int64_t best_error = -1;
  const uint64_t text_seed = rng();
  for (int round = 0; round < kRounds; ++round) {
    std::mt19937_64 text_rng(text_seed);  // the same words, cut at a different length
    std::string text = random_words(static_cast<size_t>(std::max<int64_t>(words, 1)), text_rng);
    auto n = count_tokens(text);
    if (!n.ok()) return n.status();
    const int64_t error = std::llabs(static_cast<int64_t>(*n) - target);
    if (best_error < 0 || error < best_error) {
      best = std::move(text);
      best_error = error;
      tokens = *n;
    }
    if (*n == target) break;
    words = std::max<int64_t>(1, words + (target - *n));
  }
  return best;
}

}  // namespace

absl::StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& options,
                                                         const TokenCounter& count_tokens) {
  if (options.prompt_kind == PromptKind::kTokenIds && options.vocab_size <= 0) {
    return absl::InvalidArgumentError("random token-id prompts need the model's vocab size");
  }
  if (options.prompt_kind == PromptKind::kWords && !count_tokens) {
    return absl::InvalidArgumentError("word prompts need the server's tokenizer");
  }
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> token(
      0, static_cast<int32_t>(std::max<int64_t>(options.vocab_size, 1) - 1));
  std::vector<BenchRequest> workload;
  workload.reserve(options.count);
  for (size_t i = 0; i < options.count; ++i) {
    BenchRequest r;
    const int32_t prompt_target = options.prompt_len.sample(rng);
    r.output_len = options.output_len.sample(rng);
    r.request.set_model(options.model);
    r.request.set_request_id(absl::StrCat("bench-", i));
    if (options.prompt_kind == PromptKind::kTokenIds) {
      auto* ids = r.request.mutable_token_ids()->mutable_ids();
      ids->Reserve(prompt_target);
      for (int32_t k = 0; k < prompt_target; ++k) ids->Add(token(rng));
      r.prompt_len = prompt_target;
    } else {
      auto text = calibrated_words(prompt_target, rng, count_tokens, r.prompt_len);
      if (!text.ok()) return text.status();
      r.request.set_prompt(*std::move(text));
    }
    v1::SamplingParams& sampling = *r.request.mutable_sampling();
    sampling.set_temperature(0);  // greedy: the cheapest sampler path, and reproducible
    v1::StoppingParams& stopping = *r.request.mutable_stopping();
    stopping.set_max_tokens(r.output_len);
    stopping.set_ignore_eos(true);
    workload.push_back(std::move(r));
  }
  return workload;
}

double PoissonArrivals::next_gap_seconds() {
  if (std::isinf(rate_)) return 0;
  return std::exponential_distribution<double>(rate_)(rng_);
}

}  // namespace tessera::cli
