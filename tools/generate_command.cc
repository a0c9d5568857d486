// tessera generate: one completion from a running tesserad, streamed to stdout as it arrives.
// stdout carries only the generated text; the summary (and logprobs) go to stderr.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/generate_request.h"
#include "tools/generation_flags.h"
#include "tools/interrupt.h"
#include "tools/remote_generation.h"
#include "tools/server_connection.h"

namespace tessera::cli {

namespace {

constexpr char kCommand[] = "generate";

std::string usage() {
  return absl::StrCat(
      "usage: tessera generate [flags] \"PROMPT\"\n"
      "  Streams a completion from tesserad (GenerateStream), then a summary line on stderr.\n"
      "      --model ID              the model (ListModels' id); optional with one model\n"
      "      --chat                  send PROMPT as a user chat message (chat template)\n"
      "      --system TEXT           with --chat: a system message first\n"
      "      --unary                 one Generate call instead of a stream\n"
      "      --timeout S             deadline for the call, in seconds (none)\n",
      connection_flags_usage(), sampling_flags_usage(), server_generation_flags_usage());
}

}  // namespace

int generate_command(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv,
      merge_flags({{"model", "system", "timeout"},
                   connection_value_flags(),
                   sampling_value_flags(),
                   server_generation_value_flags()}),
      merge_flags(
          {{"chat", "unary", "help"}, connection_bool_flags(), server_generation_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) return print_usage(usage());
  if (args->positional().size() != 1) {
    return report_error(kCommand, absl::InvalidArgumentError("give exactly one PROMPT (quote it)"),
                        kExitUsage);
  }
  auto flags = read_generation_flags(*args);
  if (!flags.ok()) return report_error(kCommand, flags.status(), kExitUsage);
  auto connection_options = read_connection_flags(*args);
  if (!connection_options.ok())
    return report_error(kCommand, connection_options.status(), kExitUsage);
  auto timeout = args->get_double("timeout", 0);
  if (!timeout.ok()) return report_error(kCommand, timeout.status(), kExitUsage);
  if (!(*timeout >= 0)) {
    return report_error(kCommand, absl::InvalidArgumentError("--timeout must be >= 0"), kExitUsage);
  }
  if (args->has("system") && !args->has("chat")) {
    return report_error(kCommand, absl::InvalidArgumentError("--system needs --chat"), kExitUsage);
  }

  v1::GenerateRequest request;
  request.set_model(args->get("model"));
  const std::string& prompt = args->positional()[0];
  if (args->has("chat")) {
    if (args->has("system"))
      add_chat_message(*request.mutable_chat(), "system", args->get("system"));
    add_chat_message(*request.mutable_chat(), "user", prompt);
  } else {
    request.set_prompt(prompt);
  }
  apply_generation_flags(*flags, request);

  auto connection = ServerConnection::open(*connection_options);
  if (!connection.ok()) return report_error(kCommand, connection.status());
  grpc::ClientContext context;
  (*connection)->authorize(context);
  if (*timeout > 0) set_deadline_after(context, *timeout);
  bool printed = false;
  absl::StatusOr<GenerationResult> result;
  {
    InterruptScope interrupt([&context] { context.TryCancel(); });
    if (args->has("unary")) {
      result = generate_unary(**connection, context, request);
    } else {
      result =
          generate_streaming(**connection, context, request, [&printed](const std::string& delta) {
            std::fwrite(delta.data(), 1, delta.size(), stdout);
            std::fflush(stdout);
            printed = true;
          });
    }
    if (!result.ok() && interrupt.interrupted()) {
      std::fprintf(stderr, "\n[cancelled]\n");
      return kExitInterrupted;
    }
  }
  if (!result.ok()) {
    if (printed) std::fputc('\n', stderr);
    return report_error(kCommand, result.status());
  }
  if (args->has("unary")) {
    std::fwrite(result->text.data(), 1, result->text.size(), stdout);
    std::fflush(stdout);
  }
  if (flags->logprobs) std::fprintf(stderr, "\n%s", logprobs_table(*result).c_str());
  std::fprintf(stderr, "\n%s\n", summary_line(*result).c_str());
  return 0;
}

}  // namespace tessera::cli
