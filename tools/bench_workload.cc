#include "tools/bench_workload.h"

#include <algorithm>
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

// A piece of a prompt: token ids, or words and the tokens the server counts in them.
struct Part {
  std::vector<int32_t> ids;  // kTokenIds
  std::string text;          // kWords
  int32_t tokens = 0;
};

class PartMaker {
 public:
  PartMaker(const WorkloadOptions& options, const TokenCounter& count_tokens, std::mt19937_64& rng)
      : options_(options),
        count_tokens_(count_tokens),
        rng_(rng),
        token_(0, static_cast<int32_t>(std::max<int64_t>(options.vocab_size, 1) - 1)) {}

  absl::StatusOr<Part> make(int32_t tokens) {
    Part part;
    if (options_.prompt_kind == PromptKind::kTokenIds) {
      part.ids.reserve(tokens);
      for (int32_t k = 0; k < tokens; ++k) part.ids.push_back(token_(rng_));
      part.tokens = tokens;
      return part;
    }
    auto text = calibrated_words(tokens, rng_, count_tokens_, part.tokens);
    if (!text.ok()) return text.status();
    part.text = *std::move(text);
    return part;
  }

  // The tokens the server counts in `a` followed by `b` (kWords: one more tokenization).
  absl::StatusOr<Part> join(const Part& a, const Part& b) {
    Part whole;
    if (options_.prompt_kind == PromptKind::kTokenIds) {
      whole.ids = a.ids;
      whole.ids.insert(whole.ids.end(), b.ids.begin(), b.ids.end());
      whole.tokens = a.tokens + b.tokens;
      return whole;
    }
    whole.text = absl::StrCat(a.text, "\n", b.text);
    auto n = count_tokens_(whole.text);
    if (!n.ok()) return n.status();
    whole.tokens = *n;
    return whole;
  }

 private:
  const WorkloadOptions& options_;
  const TokenCounter& count_tokens_;
  std::mt19937_64& rng_;
  std::uniform_int_distribution<int32_t> token_;
};

BenchRequest make_request(const WorkloadOptions& options, size_t index, const Part& prompt,
                          int32_t output_len) {
  BenchRequest r;
  r.prompt_len = prompt.tokens;
  r.output_len = output_len;
  r.request.set_model(options.model);
  r.request.set_request_id(absl::StrCat("bench-", index));
  if (options.prompt_kind == PromptKind::kTokenIds) {
    r.request.mutable_token_ids()->mutable_ids()->Add(prompt.ids.begin(), prompt.ids.end());
  } else {
    r.request.set_prompt(prompt.text);
  }
  v1::SamplingParams& sampling = *r.request.mutable_sampling();
  sampling.set_temperature(0);  // greedy: the cheapest sampler path, and reproducible
  v1::StoppingParams& stopping = *r.request.mutable_stopping();
  stopping.set_max_tokens(output_len);
  stopping.set_ignore_eos(true);
  return r;
}

}  // namespace

const char* workload_name(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kRandom:
      return "random";
    case WorkloadKind::kSharedPrefix:
      return "shared-prefix";
    case WorkloadKind::kMultiTurn:
      return "multi-turn";
    case WorkloadKind::kShareGpt:
      return "sharegpt";
  }
  return "";
}

absl::StatusOr<WorkloadKind> parse_workload_kind(const std::string& name) {
  for (WorkloadKind kind : {WorkloadKind::kRandom, WorkloadKind::kSharedPrefix,
                            WorkloadKind::kMultiTurn, WorkloadKind::kShareGpt}) {
    if (name == workload_name(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--workload=", name, ": expected random, shared-prefix, multi-turn or sharegpt"));
}

ShareGptLengths sharegpt_lengths(std::mt19937_64& rng, int64_t max_model_len) {
  // ShareGPT as the vLLM paper measured it (Kwon et al., "Efficient Memory Management for Large
  // Language Model Serving with PagedAttention", SOSP 2023, Fig. 11a): prompts of 161.31 tokens
  // and outputs of 337.99 tokens on average (Alpaca, for scale: 19.31 and 58.45). The paper
  // gives the means and histograms, not the spread: the log-normal's sigma = 1 is ours (a mode
  // well below the mean and a tail past 1,000 tokens, as the histograms show; median = 0.61 x
  // mean, p99 = e^2.326 = 10.2 x median, 6.2 x mean).
  static const LengthDistribution kPrompt = LengthDistribution::lognormal(161.31, 1.0);
  static const LengthDistribution kOutput = LengthDistribution::lognormal(337.99, 1.0);
  // vLLM's benchmark_serving keeps the ShareGPT pairs with prompt and output >= 4 tokens,
  // prompt <= 1024 and prompt + output <= 2048; the model's context caps both further.
  constexpr int32_t kMin = 4;
  int64_t total_cap = 2048;
  if (max_model_len > 0) total_cap = std::min(total_cap, max_model_len);
  const int32_t total = static_cast<int32_t>(std::max<int64_t>(total_cap, 2));
  const int32_t prompt_cap = std::min(1024, total - kMin);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int32_t p = kPrompt.sample(rng);
    const int32_t o = kOutput.sample(rng);
    if (p >= kMin && o >= kMin && p <= prompt_cap && p + o <= total) return {p, o};
  }
  // A context too small for ShareGPT's filter: split what there is.
  return {std::max(1, total / 2), std::max(1, total - total / 2)};
}

absl::StatusOr<std::vector<BenchRequest>> build_workload(const WorkloadOptions& options,
                                                         const TokenCounter& count_tokens) {
  if (options.prompt_kind == PromptKind::kTokenIds && options.vocab_size <= 0) {
    return absl::InvalidArgumentError("random token-id prompts need the model's vocab size");
  }
  if (options.prompt_kind == PromptKind::kWords && !count_tokens) {
    return absl::InvalidArgumentError("word prompts need the server's tokenizer");
  }
  if (options.kind == WorkloadKind::kSharedPrefix &&
      (options.prefix_count < 1 || options.prefix_len < 1)) {
    return absl::InvalidArgumentError("shared-prefix needs prefix_count and prefix_len >= 1");
  }
  if (options.kind == WorkloadKind::kMultiTurn &&
      (options.conversations < 1 || options.turns < 1)) {
    return absl::InvalidArgumentError("multi-turn needs conversations and turns >= 1");
  }
  std::mt19937_64 rng(options.seed);
  PartMaker parts(options, count_tokens, rng);
  std::vector<BenchRequest> workload;

  if (options.kind == WorkloadKind::kMultiTurn) {
    const size_t count = static_cast<size_t>(options.conversations) * options.turns;
    workload.reserve(count);
    for (int32_t c = 0; c < options.conversations; ++c) {
      int32_t history = 0;  // tokens of every earlier user part and answer
      for (int32_t t = 0; t < options.turns; ++t) {
        auto user = parts.make(options.prompt_len.sample(rng));
        if (!user.ok()) return user.status();
        const int32_t output_len = options.output_len.sample(rng);
        BenchRequest r = make_request(options, workload.size(), *user, output_len);
        r.prompt_len = history + user->tokens;
        r.conversation = c;
        r.turn = t;
        history = r.prompt_len + output_len;
        workload.push_back(std::move(r));
      }
    }
    return workload;
  }

  std::vector<Part> prefixes;
  if (options.kind == WorkloadKind::kSharedPrefix) {
    for (int32_t i = 0; i < options.prefix_count; ++i) {
      auto prefix = parts.make(options.prefix_len);
      if (!prefix.ok()) return prefix.status();
      prefixes.push_back(*std::move(prefix));
    }
  }
  workload.reserve(options.count);
  for (size_t i = 0; i < options.count; ++i) {
    int32_t prompt_len, output_len;
    if (options.kind == WorkloadKind::kShareGpt) {
      const ShareGptLengths lengths = sharegpt_lengths(rng, options.max_model_len);
      prompt_len = lengths.prompt_len;
      output_len = lengths.output_len;
    } else {
      prompt_len = options.prompt_len.sample(rng);
      output_len = options.output_len.sample(rng);
    }
    auto prompt = parts.make(prompt_len);
    if (!prompt.ok()) return prompt.status();
    if (options.kind == WorkloadKind::kSharedPrefix) {
      prompt = parts.join(prefixes[i % prefixes.size()], *prompt);
      if (!prompt.ok()) return prompt.status();
    }
    workload.push_back(make_request(options, i, *prompt, output_len));
  }
  return workload;
}

double PoissonArrivals::next_gap_seconds() {
  if (std::isinf(rate_)) return 0;
  return std::exponential_distribution<double>(rate_)(rng_);
}

}  // namespace tessera::cli
