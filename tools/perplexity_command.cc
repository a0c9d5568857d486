// tessera perplexity: loads a model in-process and scores a text file with it -- the perplexity of
// transformers' sliding-window guide (runtime/perplexity.h) -- to check a model, its dtype or its
// placement or FP8 weights on a real text. Prints a table (the weights column: none, or fp8 and
// what quantization_keep keeps) and writes JSON.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/model_files.h"
#include "runtime/model_instance.h"
#include "runtime/perplexity.h"
#include "tools/cli_args.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/instance_flags.h"
#include "tools/text_table.h"

namespace tessera::cli {

namespace {

constexpr char kUsage[] =
    "usage: tessera perplexity --model PATH --text FILE [flags]\n"
    "  Scores FILE (UTF-8 text) with the model: windows of --context tokens every --stride\n"
    "  tokens, each token after the first scored once; prints tokens, mean negative\n"
    "  log-likelihood and perplexity (exp of it), with --json a copy.\n"
    "      --model PATH            a .gguf file or a Hugging Face model directory (required)\n"
    "      --text FILE             the text to score (required)\n"
    "      --context N             tokens in a window (default 1024; the max_model_len, at most\n"
    "                              the model's positions)\n"
    "      --stride N              tokens between windows (default context / 2)\n"
    "      --max-tokens N          score only the text's first N tokens (default all)\n"
    "      --json PATH             write the result as JSON\n";
constexpr char kCommand[] = "perplexity";

// A bad flag or input (exit 2), or a failure while loading or scoring (exit 1).
int usage_error(const absl::Status& status) { return report_error(kCommand, status, kExitUsage); }
int fail(const absl::Status& status) { return report_error(kCommand, status); }

absl::StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("--text: cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return absl::InvalidArgumentError("--text: " + path + " is empty");
  return text.str();
}

}  // namespace

int perplexity_command(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv,
      merge_flags({{"model", "text", "context", "stride", "max-tokens", "json"}, instance_flags()}),
      {"help"});
  if (!args.ok()) return usage_error(args.status());
  if (args->has("help")) return print_usage(absl::StrCat(kUsage, kInstanceFlagsUsage));
  if (!args->positional().empty()) {
    return usage_error(absl::InvalidArgumentError("takes no arguments besides flags"));
  }
  const std::string model_path = args->get("model"), text_path = args->get("text");
  if (model_path.empty()) return usage_error(absl::InvalidArgumentError("--model PATH is required"));
  if (text_path.empty()) return usage_error(absl::InvalidArgumentError("--text FILE is required"));
  auto context = args->get_int("context", 1024);
  if (!context.ok()) return usage_error(context.status());
  auto stride = args->get_int("stride", *context / 2);
  if (!stride.ok()) return usage_error(stride.status());
  auto max_tokens = args->get_int("max-tokens", 0);
  if (!max_tokens.ok()) return usage_error(max_tokens.status());
  if (*context < 2 || *stride < 1 || *stride > *context || *max_tokens < 0) {
    return usage_error(absl::InvalidArgumentError(absl::StrFormat(
        "--context %d, --stride %d, --max-tokens %d: the context must be at least 2, the stride "
        "1 .. context, max-tokens 0 (all) or more",
        *context, *stride, *max_tokens)));
  }
  auto text = read_text(text_path);
  if (!text.ok()) return fail(text.status());

  // --context is the run's max_model_len: a window past the model's positions is this flag's
  // mistake, said so before the weights load (ModelInstance::load would name the daemon's key).
  auto files = ModelFiles::open(model_path);
  if (!files.ok()) return fail(files.status());
  if (const int64_t positions = files->config().max_position_embeddings;
      positions > 0 && *context > positions) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrFormat("--context %d exceeds the model's %d positions "
                        "(max_position_embeddings): at most %d",
                        *context, positions, positions)));
  }
  auto options = instance_options(*args);
  if (!options.ok()) return usage_error(options.status());
  options->engine.max_num_seqs = 1;
  options->engine.max_model_len = static_cast<int32_t>(*context);
  // Every row of a chunk may be scored: a step's tokens and logit rows alike.
  options->limits.max_batch_tokens = 512;
  options->limits.max_logit_rows = 512;
  options->kv_cache_bytes = 0;  // one sequence of max_model_len
  auto instance = ModelInstance::load(model_path, *std::move(files), *options);
  if (!instance.ok()) return fail(instance.status());
  ModelInstance& inst = **instance;

  auto ids = inst.tokenizer().encode(*text);
  if (!ids.ok()) return fail(ids.status());
  if (*max_tokens > 0 && static_cast<int64_t>(ids->size()) > *max_tokens) ids->resize(*max_tokens);
  const auto start = std::chrono::steady_clock::now();
  auto result = perplexity(inst.runner(), inst.cache(), *ids,
                           PerplexityOptions{static_cast<int32_t>(*context),
                                             static_cast<int32_t>(*stride)});
  if (!result.ok()) return fail(result.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string backend = absl::StrFormat("%s, %s", inst.backend().name(),
                                              dtype_name(inst.backend().compute_dtype()));
  // What the linear weights are kept in: the compute dtype, or FP8 but for the kept ones.
  std::string weights(quantization_name(inst.quantization()));
  if (inst.quantization() == Quantization::kFp8 && !options->quantization_keep.empty()) {
    weights += " (keep " + options->quantization_keep.text() + ")";
  }
  const std::string kv_cache(dtype_name(inst.cache().dtype()));
  TextTable table({{"backend"}, {"weights"}, {"kv cache"}, {"text"}, {"tokens", true},
                   {"scored", true}, {"context", true}, {"stride", true}, {"mean nll", true},
                   {"perplexity", true}, {"s", true}, {"tok/s", true}});
  table.add_row({backend, weights, kv_cache, text_path, std::to_string(result->tokens),
                 std::to_string(result->scored), std::to_string(*context), std::to_string(*stride),
                 absl::StrFormat("%.4f", result->mean_nll()),
                 absl::StrFormat("%.4f", result->perplexity()), absl::StrFormat("%.1f", seconds),
                 absl::StrFormat("%.0f", result->tokens / seconds)});
  std::printf("%s", table.render().c_str());
  if (const std::string json = args->get("json"); !json.empty()) {
    nlohmann::json report = {{"model", model_path},     {"text", text_path},
                             {"backend", backend},       {"weights", weights},
                             {"kv_cache", kv_cache},
                             {"tokens", result->tokens}, {"scored", result->scored},
                             {"windows", result->windows}, {"context", *context},
                             {"stride", *stride},        {"mean_nll", result->mean_nll()},
                             {"perplexity", result->perplexity()}, {"seconds", seconds}};
    std::ofstream(json) << report.dump(2) << "\n";
  }
  return 0;
}

}  // namespace tessera::cli
