// tessera tokenize: how tesserad's tokenizer splits a text (or a chat message rendered with the
// model's chat template): a table of token ids and texts, or just the ids.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/client_context.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/generate_request.h"
#include "tools/proto_text.h"
#include "tools/server_connection.h"
#include "tools/text_table.h"

namespace tessera::cli {

namespace {

constexpr char kCommand[] = "tokenize";
constexpr double kCallTimeoutSeconds = 30;

std::string usage() {
  return absl::StrCat(
      "usage: tessera tokenize [flags] \"TEXT\"\n"
      "  Shows the token ids and token texts tesserad's tokenizer makes of TEXT.\n"
      "      --model ID              the model (ListModels' id); optional with one model\n"
      "      --chat                  tokenize TEXT as a user chat message (chat template)\n"
      "      --no-special-tokens     do not add BOS/EOS (text input)\n"
      "      --ids                   print only the ids, space-separated\n",
      connection_flags_usage());
}

}  // namespace

int tokenize_command(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv, merge_flags({{"model"}, connection_value_flags()}),
      merge_flags({{"chat", "no-special-tokens", "ids", "help"}, connection_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) return print_usage(usage());
  if (args->positional().size() != 1) {
    return report_error(kCommand, absl::InvalidArgumentError("give exactly one TEXT (quote it)"),
                        kExitUsage);
  }
  auto connection_options = read_connection_flags(*args);
  if (!connection_options.ok())
    return report_error(kCommand, connection_options.status(), kExitUsage);
  auto connection = ServerConnection::open(*connection_options);
  if (!connection.ok()) return report_error(kCommand, connection.status());

  v1::TokenizeRequest request;
  request.set_model(args->get("model"));
  if (args->has("chat")) {
    add_chat_message(*request.mutable_chat(), "user", args->positional()[0]);
  } else {
    request.set_text(args->positional()[0]);
    request.set_add_special_tokens(!args->has("no-special-tokens"));
  }
  grpc::ClientContext context;
  (*connection)->authorize(context);
  set_deadline_after(context, kCallTimeoutSeconds);
  v1::TokenizeResponse response;
  const grpc::Status status = (*connection)->generation().Tokenize(&context, request, &response);
  if (absl::Status s = (*connection)->check(status); !s.ok()) return report_error(kCommand, s);

  if (args->has("ids")) {
    std::printf("%s\n", absl::StrJoin(response.token_ids(), " ").c_str());
    return 0;
  }
  TextTable table({{"#", true}, {"ID", true}, {"TOKEN"}});
  for (int i = 0; i < response.token_ids_size(); ++i) {
    const std::string token = i < response.tokens_size() ? quote_token(response.tokens(i)) : "";
    table.add_row({absl::StrCat(i), absl::StrCat(response.token_ids(i)), token});
  }
  std::fputs(table.render().c_str(), stdout);
  std::printf("%d tokens\n", response.token_ids_size());
  return 0;
}

}  // namespace tessera::cli
