// tessera models: the models a running tesserad serves (ListModels), as a table.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/server_connection.h"
#include "tools/text_table.h"

namespace tessera::cli {

namespace {

constexpr char kCommand[] = "models";
constexpr double kCallTimeoutSeconds = 30;

std::string usage() {
  return absl::StrCat(
      "usage: tessera models [flags]\n"
      "  Lists the models tesserad serves, with their limits.\n",
      connection_flags_usage());
}

std::string gibibytes(int64_t bytes) {
  return absl::StrFormat("%.2f", bytes / 1073741824.0);
}

}  // namespace

int models_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, connection_value_flags(),
                          merge_flags({{"help"}, connection_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) return print_usage(usage());
  if (!args->positional().empty()) {
    return report_error(kCommand, absl::InvalidArgumentError("models takes no arguments"),
                        kExitUsage);
  }
  auto connection_options = read_connection_flags(*args);
  if (!connection_options.ok())
    return report_error(kCommand, connection_options.status(), kExitUsage);
  auto connection = ServerConnection::open(*connection_options);
  if (!connection.ok()) return report_error(kCommand, connection.status());

  grpc::ClientContext context;
  (*connection)->authorize(context);
  set_deadline_after(context, kCallTimeoutSeconds);
  v1::ListModelsResponse response;
  const grpc::Status status =
      (*connection)->generation().ListModels(&context, v1::ListModelsRequest(), &response);
  if (absl::Status s = (*connection)->check(status); !s.ok()) return report_error(kCommand, s);
  if (response.models_size() == 0) {
    std::fprintf(stderr, "tesserad at %s serves no models\n", (*connection)->address().c_str());
    return 0;
  }
  TextTable table({{"ID"},
                   {"ARCH"},
                   {"BACKEND"},
                   {"DTYPE"},
                   {"VOCAB", true},
                   {"LAYERS", true},
                   {"HEADS/KV", true},
                   {"HIDDEN", true},
                   {"MAX LEN", true},
                   {"KV BLOCKS", true},
                   {"SEQS", true},
                   {"BATCH TOK", true},
                   {"WEIGHTS GiB", true},
                   {"CHAT"},
                   {"PATH"}});
  for (const v1::ModelInfo& m : response.models()) {
    table.add_row({m.id(), m.architecture(), m.backend(), m.dtype(), absl::StrCat(m.vocab_size()),
                   absl::StrCat(m.num_layers()), absl::StrCat(m.num_heads(), "/", m.num_kv_heads()),
                   absl::StrCat(m.hidden_size()), absl::StrCat(m.max_model_len()),
                   absl::StrCat(m.kv_cache_blocks(), "x", m.kv_block_size()),
                   absl::StrCat(m.max_num_seqs()), absl::StrCat(m.max_batch_tokens()),
                   gibibytes(m.weight_bytes()), m.has_chat_template() ? "yes" : "no", m.path()});
  }
  std::fputs(table.render().c_str(), stdout);
  return 0;
}

}  // namespace tessera::cli
