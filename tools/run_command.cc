// tessera run: loads a model, generates for one prompt on the local engine, streams the text.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/model_instance.h"
#include "tools/cli_args.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "tools/instance_flags.h"

namespace tessera::cli {

namespace {

constexpr char kUsage[] =
    "usage: tessera run --model PATH [flags] \"PROMPT\"\n"
    "  Generates offline (no server), streaming the text, then one summary\n"
    "  line on stderr: prompt and generated tokens, prefill and decode tok/s.\n"
    "      --model PATH            a .gguf file or a Hugging Face model directory (required)\n"
    "      --chat                  render PROMPT as a user message with the model's chat template\n"
    "      --max-tokens N          tokens to generate at most (default 256)\n"
    "      --temperature T         0 = greedy (default 0.7)\n"
    "      --top-k K, --top-p P, --min-p P, --seed S   sampling (seed: same seed, same output)\n";

int fail(const absl::Status& status) {
  std::fprintf(stderr, "tessera run: %s\n", std::string(status.message()).c_str());
  return 1;
}

// The sampling group of the shared generation flags, onto the engine's request.
absl::Status read_sampling(const Args& args, Request& request) {
  auto flags = read_generation_flags(args);
  if (!flags.ok()) return flags.status();
  SamplingParams& s = request.sampling;
  request.stop.max_tokens = flags->max_tokens;
  s.temperature = flags->temperature;
  s.top_k = flags->top_k;
  s.top_p = flags->top_p;
  s.min_p = flags->min_p;
  if (flags->seed) {
    s.seed = *flags->seed;
    s.has_seed = true;
  }
  return absl::OkStatus();
}

}  // namespace

int run_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, merge_flags({{"model"}, instance_flags(), sampling_value_flags()}),
                          {"chat", "help"});
  if (!args.ok()) return fail(args.status());
  if (args->has("help")) return print_usage(absl::StrCat(kUsage, kInstanceFlagsUsage));
  const std::string model_path = args->get("model");
  if (model_path.empty()) return fail(absl::InvalidArgumentError("--model PATH is required"));
  if (args->positional().size() != 1) {
    return fail(absl::InvalidArgumentError("give exactly one PROMPT (quote it)"));
  }
  const std::string& prompt_text = args->positional()[0];
  auto request = std::make_shared<Request>();
  request->id = "run";
  if (absl::Status s = read_sampling(*args, *request); !s.ok()) return fail(s);
  auto options = instance_options(*args);
  if (!options.ok()) return fail(options.status());
  options->engine.max_num_seqs = 1;
  options->limits.max_logit_rows = 1;
  // One sequence: the cache needs its context and no more.
  options->kv_cache_bytes = 0;
  auto instance = ModelInstance::load(model_path, *options);
  if (!instance.ok()) return fail(instance.status());
  ModelInstance& inst = **instance;

  absl::StatusOr<std::vector<int32_t>> prompt;
  if (args->has("chat")) {
    const ChatMessage message{"user", prompt_text};
    prompt = inst.files().encode_chat({&message, 1});
  } else {
    prompt = inst.tokenizer().encode(prompt_text);
  }
  if (!prompt.ok()) return fail(prompt.status());
  request->prompt = *std::move(prompt);

  auto handle = inst.engine().submit(request);
  if (!handle.ok()) return fail(handle.status());
  inst.engine().start();
  RequestOutput out;
  do {
    out = handle->stream->next();
    std::fwrite(out.text.data(), 1, out.text.size(), stdout);
    std::fflush(stdout);
  } while (!out.finished);
  if (!out.status.ok()) return fail(out.status);
  const double prefill_tps = out.ttft_seconds > 0 ? out.prompt_tokens / out.ttft_seconds : 0;
  const double decode_s = out.total_seconds - out.ttft_seconds;
  const double decode_tps = decode_s > 0 ? (out.completion_tokens - 1) / decode_s : 0;
  std::fprintf(
      stderr,
      "\n[prompt %d tokens, generated %d tokens (%s), prefill %.1f tok/s, decode %.1f tok/s]\n",
      out.prompt_tokens, out.completion_tokens, finish_reason_name(out.finish_reason), prefill_tps,
      decode_tps);
  return 0;
}

}  // namespace tessera::cli
