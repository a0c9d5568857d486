#include "tools/generation_flags.h"

#include "absl/strings/str_cat.h"

namespace tessera::cli {

const std::set<std::string>& sampling_value_flags() {
  static const std::set<std::string> flags = {"max-tokens", "temperature", "top-k",
                                              "top-p",      "min-p",       "seed"};
  return flags;
}

const std::set<std::string>& server_generation_value_flags() {
  static const std::set<std::string> flags = {
      "min-tokens", "repetition-penalty", "frequency-penalty", "presence-penalty", "stop",
      "logprobs"};
  return flags;
}

const std::set<std::string>& server_generation_bool_flags() {
  static const std::set<std::string> flags = {"ignore-eos"};
  return flags;
}

absl::StatusOr<GenerationFlags> read_generation_flags(const Args& args) {
  GenerationFlags f;
  auto max_tokens = args.get_int("max-tokens", f.max_tokens);
  auto temperature = args.get_double("temperature", f.temperature);
  auto top_k = args.get_int("top-k", f.top_k);
  auto top_p = args.get_double("top-p", f.top_p);
  auto min_p = args.get_double("min-p", f.min_p);
  auto seed = args.get_int("seed", -1);
  auto min_tokens = args.get_int("min-tokens", f.min_tokens);
  auto repetition = args.get_double("repetition-penalty", f.repetition_penalty);
  auto frequency = args.get_double("frequency-penalty", f.frequency_penalty);
  auto presence = args.get_double("presence-penalty", f.presence_penalty);
  auto logprobs = args.get_int("logprobs", -1);
  for (const absl::Status& st :
       {max_tokens.status(), temperature.status(), top_k.status(), top_p.status(), min_p.status(),
        seed.status(), min_tokens.status(), repetition.status(), frequency.status(),
        presence.status(), logprobs.status()}) {
    if (!st.ok()) return st;
  }
  if (*max_tokens <= 0 || *max_tokens > INT32_MAX) {
    return absl::InvalidArgumentError("--max-tokens must be positive");
  }
  if (!(*temperature >= 0)) return absl::InvalidArgumentError("--temperature must be >= 0");
  if (*top_k < 0 || *top_k > INT32_MAX) return absl::InvalidArgumentError("--top-k must be >= 0");
  if (!(*top_p > 0 && *top_p <= 1)) return absl::InvalidArgumentError("--top-p must be in (0, 1]");
  if (!(*min_p >= 0 && *min_p <= 1)) return absl::InvalidArgumentError("--min-p must be in [0, 1]");
  if (*min_tokens < 0 || *min_tokens > *max_tokens) {
    return absl::InvalidArgumentError("--min-tokens must be in [0, --max-tokens]");
  }
  if (!(*repetition > 0)) return absl::InvalidArgumentError("--repetition-penalty must be > 0");
  if (!(*frequency >= -2 && *frequency <= 2)) {
    return absl::InvalidArgumentError("--frequency-penalty must be in [-2, 2]");
  }
  if (!(*presence >= -2 && *presence <= 2)) {
    return absl::InvalidArgumentError("--presence-penalty must be in [-2, 2]");
  }
  if (args.has("logprobs") && (*logprobs < 0 || *logprobs > 20)) {
    return absl::InvalidArgumentError("--logprobs must be in [0, 20]");
  }
  f.stop = args.get_all("stop");
  for (const std::string& s : f.stop) {
    if (s.empty()) return absl::InvalidArgumentError("--stop needs a non-empty string");
  }

  f.max_tokens = static_cast<int32_t>(*max_tokens);
  f.temperature = static_cast<float>(*temperature);
  f.top_k = static_cast<int32_t>(*top_k);
  f.top_p = static_cast<float>(*top_p);
  f.min_p = static_cast<float>(*min_p);
  if (*seed >= 0) f.seed = static_cast<uint64_t>(*seed);
  f.min_tokens = static_cast<int32_t>(*min_tokens);
  f.repetition_penalty = static_cast<float>(*repetition);
  f.frequency_penalty = static_cast<float>(*frequency);
  f.presence_penalty = static_cast<float>(*presence);
  f.ignore_eos = args.has("ignore-eos");
  if (*logprobs >= 0) f.logprobs = static_cast<int32_t>(*logprobs);
  return f;
}

const char* sampling_flags_usage() {
  return "      --max-tokens N          tokens to generate at most (256)\n"
         "      --temperature T         0 = greedy (0.7)\n"
         "      --top-k K               keep the K most likely tokens; 0 = off (0)\n"
         "      --top-p P               nucleus mass in (0, 1] (1)\n"
         "      --min-p P               drop tokens below P x the most likely, [0, 1] (0)\n"
         "      --seed S                same seed, same output (random)\n";
}

const char* server_generation_flags_usage() {
  return "      --min-tokens N          ignore end-of-sequence before N tokens (0)\n"
         "      --repetition-penalty R  > 0; 1 = off (1)\n"
         "      --frequency-penalty F   [-2, 2] (0)\n"
         "      --presence-penalty P    [-2, 2] (0)\n"
         "      --stop STR              stop at STR, cut from the output (repeatable)\n"
         "      --ignore-eos            keep generating past end-of-sequence\n"
         "      --logprobs N            print each token's logprob and N alternatives [0, 20]\n";
}

}  // namespace tessera::cli
