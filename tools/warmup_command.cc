// tessera warmup: tunes the served model's GEMMs on a running tesserad (Admin.Warmup), with a
// progress bar on stderr, then prints the table of tuned GEMMs on stdout.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/client_context.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/progress_bar.h"
#include "tools/server_connection.h"
#include "tools/text_table.h"
#include "tools/warmup_flags.h"

namespace tessera::cli {

namespace {

constexpr char kCommand[] = "warmup";
constexpr int kBarWidth = 30;

std::string usage() {
  return absl::StrCat(
      "usage: tessera warmup [flags]\n"
      "  Tunes every GEMM the served model runs (tesserad's tuning_mode must be tune or warmup)\n"
      "  and prints the tuned solutions. Serving goes on meanwhile.\n"
      "      --buckets 1,2,4         decode token buckets (the server's tuning_decode_buckets)\n"
      "      --prefill-pad N         prefill token counts padded to multiples of N (the server's)\n"
      "      --max-prefill-tokens N  largest step tuned, in tokens (the server's max_batch_tokens)\n"
      "      --budget-s S            start no GEMM after S seconds (no budget)\n"
      "      --force                 re-tune GEMMs that already have a result\n"
      "      --admin-token T         the server's admin token ($TESSERA_ADMIN_TOKEN)\n",
      connection_flags_usage());
}

std::string progress_text(const v1::WarmupProgress& p) {
  const double fraction =
      p.total() > 0 ? static_cast<double>(p.done()) / static_cast<double>(p.total()) : 1.0;
  std::string line = absl::StrFormat("%s %d/%d GEMMs, %.1f s", progress_bar_text(fraction, kBarWidth),
                                     p.done(), p.total(), p.elapsed_seconds());
  if (p.has_current()) {
    const v1::TunedGemm& g = p.current();
    absl::StrAppend(&line, "  ", g.used_by(), " ", g.params(), ": ", g.outcome());
    if (!g.solution().empty()) absl::StrAppend(&line, " ", g.solution());
    if (g.gain() > 0) absl::StrAppend(&line, absl::StrFormat(" (%.2fx)", g.gain()));
  }
  return line;
}

std::string ms_text(double ms) { return ms > 0 ? absl::StrFormat("%.4f", ms) : "-"; }

std::string table_text(const v1::WarmupProgress& final) {
  TextTable table({{"DEV", true},
                   {"USED BY"},
                   {"OP"},
                   {"PARAMS"},
                   {"OUTCOME"},
                   {"SOLUTION"},
                   {"AVG MS", true},
                   {"DEFAULT MS", true},
                   {"GAIN", true}});
  for (const v1::TunedGemm& g : final.table()) {
    table.add_row({absl::StrCat(g.device()), g.used_by(), g.op(), g.params(),
                   g.message().empty() ? g.outcome() : absl::StrCat(g.outcome(), ": ", g.message()),
                   g.solution(), ms_text(g.avg_ms()), ms_text(g.default_ms()),
                   g.gain() > 0 ? absl::StrFormat("%.2fx", g.gain()) : "-"});
  }
  return table.render();
}

}  // namespace

int warmup_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, merge_flags({connection_value_flags(), warmup_value_flags()}),
                          merge_flags({{"help"}, connection_bool_flags(), warmup_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) return print_usage(usage());
  if (!args->positional().empty()) {
    return report_error(kCommand, absl::InvalidArgumentError("warmup takes no arguments"),
                        kExitUsage);
  }
  auto flags = read_warmup_flags(*args);
  if (!flags.ok()) return report_error(kCommand, flags.status(), kExitUsage);
  auto connection_options = read_connection_flags(*args);
  if (!connection_options.ok()) {
    return report_error(kCommand, connection_options.status(), kExitUsage);
  }
  auto connection = ServerConnection::open(*connection_options);
  if (!connection.ok()) return report_error(kCommand, connection.status());

  std::unique_ptr<v1::Admin::Stub> admin = v1::Admin::NewStub((*connection)->channel());
  grpc::ClientContext context;
  // tesserad takes the admin token wherever it asks for the API key: send one of them.
  if (!flags->admin_token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", flags->admin_token));
  } else {
    (*connection)->authorize(context);
  }
  std::unique_ptr<grpc::ClientReader<v1::WarmupProgress>> reader =
      admin->Warmup(&context, flags->request);
  const bool tty = stderr_is_tty();
  v1::WarmupProgress message;
  v1::WarmupProgress final;
  bool have_final = false;
  while (reader->Read(&message)) {
    if (message.state() != "running") {
      final = message;
      have_final = true;
      continue;
    }
    const std::string line = progress_text(message);
    if (tty) {
      std::fprintf(stderr, "\r%s\033[K", line.c_str());
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  }
  if (tty) std::fputs("\n", stderr);
  if (absl::Status s = (*connection)->check(reader->Finish()); !s.ok()) {
    return report_error(kCommand, s);
  }
  if (!have_final) {
    return report_error(kCommand, absl::InternalError("the server ended without a final table"));
  }
  std::fputs(table_text(final).c_str(), stdout);
  std::fprintf(stderr, "warmup %s in %.1f s: %s\n", final.state().c_str(), final.elapsed_seconds(),
               final.summary().c_str());
  return final.state() == "done" ? 0 : kExitError;
}

}  // namespace tessera::cli
