// tessera chat: an interactive conversation with a model served by tesserad. Each line read
// from stdin is a user turn; the whole conversation goes with every request (ChatInput), and
// the answer streams to stdout. /reset forgets the conversation, /exit (or end of input) leaves.
// Ctrl-C while an answer streams cancels that answer and drops the turn.
#include <cstdio>
#include <iostream>
#include <string>

#include "absl/strings/ascii.h"
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

constexpr char kCommand[] = "chat";

std::string usage() {
  return absl::StrCat(
      "usage: tessera chat [flags]\n"
      "  Interactive chat with tesserad: type a message, the answer streams back.\n"
      "  Commands: /reset (start over), /exit (or Ctrl-D). Ctrl-C cancels an answer.\n"
      "      --model ID              the model (ListModels' id); optional with one model\n"
      "      --system TEXT           a system message at the start of the conversation\n"
      "      --timeout S             deadline for each answer, in seconds (none)\n"
      "      --stats                 a summary line after each answer, on stderr\n",
      connection_flags_usage(), sampling_flags_usage(), server_generation_flags_usage());
}

void reset_conversation(v1::ChatInput& conversation, const std::string& system) {
  conversation.Clear();
  if (!system.empty()) add_chat_message(conversation, "system", system);
}

}  // namespace

int chat_command(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv,
      merge_flags({{"model", "system", "timeout"},
                   connection_value_flags(),
                   sampling_value_flags(),
                   server_generation_value_flags()}),
      merge_flags({{"stats", "help"}, connection_bool_flags(), server_generation_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) return print_usage(usage());
  if (!args->positional().empty()) {
    return report_error(kCommand, absl::InvalidArgumentError("chat takes no PROMPT; type it"),
                        kExitUsage);
  }
  auto flags = read_generation_flags(*args);
  if (!flags.ok()) return report_error(kCommand, flags.status(), kExitUsage);
  auto connection_options = read_connection_flags(*args);
  if (!connection_options.ok())
    return report_error(kCommand, connection_options.status(), kExitUsage);
  auto timeout = args->get_double("timeout", 0);
  if (!timeout.ok()) return report_error(kCommand, timeout.status(), kExitUsage);
  auto connection = ServerConnection::open(*connection_options);
  if (!connection.ok()) return report_error(kCommand, connection.status());

  const bool interactive = stdin_is_tty();
  const std::string system = args->get("system");
  v1::ChatInput conversation;
  reset_conversation(conversation, system);
  if (interactive) {
    std::fprintf(stderr, "chatting with %s; /reset starts over, /exit or Ctrl-D leaves\n",
                 (*connection)->address().c_str());
  }
  int failed_turns = 0;
  std::string line;
  while (true) {
    if (interactive) std::fputs(">>> ", stderr);
    if (!std::getline(std::cin, line)) break;
    const std::string text(absl::StripAsciiWhitespace(line));
    if (text.empty()) continue;
    if (text == "/exit" || text == "/quit") break;
    if (text == "/reset") {
      reset_conversation(conversation, system);
      std::fputs("[conversation reset]\n", stderr);
      continue;
    }
    if (text == "/help") {
      std::fputs("/reset  forget the conversation\n/exit   leave\n", stderr);
      continue;
    }
    if (text[0] == '/') {
      std::fprintf(stderr, "unknown command %s (try /help)\n", text.c_str());
      continue;
    }

    add_chat_message(conversation, "user", line);
    v1::GenerateRequest request;
    request.set_model(args->get("model"));
    *request.mutable_chat() = conversation;
    apply_generation_flags(*flags, request);
    grpc::ClientContext context;
    (*connection)->authorize(context);
    if (*timeout > 0) set_deadline_after(context, *timeout);
    absl::StatusOr<GenerationResult> result;
    bool interrupted = false;
    {
      InterruptScope interrupt([&context] { context.TryCancel(); });
      result = generate_streaming(**connection, context, request, [](const std::string& delta) {
        std::fwrite(delta.data(), 1, delta.size(), stdout);
        std::fflush(stdout);
      });
      interrupted = interrupt.interrupted();
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!result.ok()) {
      // The turn did not happen: forget the question too.
      conversation.mutable_messages()->RemoveLast();
      if (interrupted) {
        std::fputs("[cancelled]\n", stderr);
      } else {
        report_error(kCommand, result.status());
        ++failed_turns;
      }
      continue;
    }
    add_chat_message(conversation, "assistant", result->text);
    if (args->has("stats")) std::fprintf(stderr, "%s\n", summary_line(*result).c_str());
  }
  if (interactive) std::fputc('\n', stderr);
  // Scripted input (not a terminal) learns whether every turn got an answer.
  return !interactive && failed_turns > 0 ? kExitError : 0;
}

}  // namespace tessera::cli
