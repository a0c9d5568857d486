// tessera bench serve: load-tests a running tesserad (see bench_options.cc and
// bench_workload_flags.cc for the flags). Asks the server for the model's vocabulary and length
// limit, synthesizes the workload, runs it with a progress bar on stderr (reading the server's
// counters before and after with --admin-server), then prints the report on stdout (and writes
// --json).
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "tools/bench_options.h"
#include "tools/bench_report.h"
#include "tools/bench_runner.h"
#include "tools/bench_workload.h"
#include "tools/bench_workload_flags.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/interrupt.h"
#include "tools/progress_bar.h"
#include "tools/server_connection.h"
#include "tools/server_metrics.h"

namespace tessera::cli {

namespace {

constexpr char kCommand[] = "bench serve";
constexpr double kSetupCallTimeoutSeconds = 30;
constexpr int kExitRequestsFailed = 3;

absl::StatusOr<v1::ModelInfo> model_info(ServerConnection& connection, const std::string& model) {
  grpc::ClientContext context;
  connection.authorize(context);
  set_deadline_after(context, kSetupCallTimeoutSeconds);
  v1::GetModelInfoRequest request;
  request.set_model(model);
  v1::ModelInfo info;
  const grpc::Status status = connection.generation().GetModelInfo(&context, request, &info);
  if (absl::Status s = connection.check(status); !s.ok()) return s;
  return info;
}

TokenCounter server_token_counter(ServerConnection& connection, const std::string& model) {
  return [&connection, model](const std::string& text) -> absl::StatusOr<int32_t> {
    grpc::ClientContext context;
    connection.authorize(context);
    set_deadline_after(context, kSetupCallTimeoutSeconds);
    v1::TokenizeRequest request;
    request.set_model(model);
    request.set_text(text);
    request.set_add_special_tokens(true);  // as a prompt is tokenized for generation
    v1::TokenizeResponse response;
    const grpc::Status status = connection.generation().Tokenize(&context, request, &response);
    if (absl::Status s = connection.check(status); !s.ok()) return s;
    return response.token_ids_size();
  };
}

// Every request must fit the model's context: better said now than as 100 OUT_OF_RANGE errors.
absl::Status check_lengths(const std::vector<BenchRequest>& workload, int64_t max_model_len) {
  if (max_model_len <= 0) return absl::OkStatus();
  for (const BenchRequest& r : workload) {
    if (r.prompt_len + r.output_len > max_model_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("a request of ", r.prompt_len, " prompt + ", r.output_len,
                       " output tokens exceeds the model's max length of ", max_model_len,
                       " tokens; lower --prompt-len or --output-len (multi-turn: --turns;",
                       " shared-prefix: --prefix-len)"));
    }
  }
  return absl::OkStatus();
}

// The workload's own parameters, as the report shows them.
nlohmann::ordered_json workload_params(const WorkloadFlags& flags) {
  switch (flags.kind) {
    case WorkloadKind::kRandom:
      break;
    case WorkloadKind::kSharedPrefix:
      return {{"prefix_count", flags.prefix_count}, {"prefix_len", flags.prefix_len}};
    case WorkloadKind::kMultiTurn:
      return {{"conversations", flags.conversations}, {"turns", flags.turns}};
    case WorkloadKind::kShareGpt:
      return {{"prompt_len", "lognormal:161:1"}, {"output_len", "lognormal:338:1"},
              {"filter", "prompt, output >= 4; prompt <= 1024; total <= min(2048, context)"}};
  }
  return nlohmann::ordered_json::object();
}

// The server's counters, or nullopt (with a warning) when the admin listener cannot be read.
std::optional<std::map<std::string, double>> read_counters(const std::string& address) {
  if (address.empty()) return std::nullopt;
  auto metrics = scrape_metrics(address);
  if (!metrics.ok()) {
    std::fprintf(stderr, "bench serve: no server counters: %s\n",
                 std::string(metrics.status().message()).c_str());
    return std::nullopt;
  }
  return *std::move(metrics);
}

int bench_serve_command(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv,
      merge_flags({bench_serve_value_flags(), bench_workload_value_flags(), connection_value_flags()}),
      merge_flags({{"help"}, connection_bool_flags()}));
  if (!args.ok()) return report_error(kCommand, args.status(), kExitUsage);
  if (args->has("help")) {
    return print_usage(
        absl::StrCat(bench_serve_usage(), bench_workload_usage(), connection_flags_usage()));
  }
  if (!args->positional().empty()) {
    return report_error(kCommand, absl::InvalidArgumentError("bench serve takes no arguments"),
                        kExitUsage);
  }
  auto options = read_bench_serve_flags(*args);
  if (!options.ok()) return report_error(kCommand, options.status(), kExitUsage);
  auto workload_flags = read_bench_workload_flags(*args);
  if (!workload_flags.ok()) return report_error(kCommand, workload_flags.status(), kExitUsage);
  if (workload_flags->kind == WorkloadKind::kMultiTurn) {
    // Every turn once (a timed run may stop sending sooner).
    const size_t turns =
        static_cast<size_t>(workload_flags->conversations) * static_cast<size_t>(workload_flags->turns);
    options->runner.num_requests = turns;
    options->workload_size = turns;
  }
  auto connection = ServerConnection::open(options->connection);
  if (!connection.ok()) return report_error(kCommand, connection.status());
  ServerConnection& server = **connection;

  auto info = model_info(server, options->model);
  if (!info.ok()) return report_error(kCommand, info.status());
  WorkloadOptions workload_options;
  workload_options.kind = workload_flags->kind;
  workload_options.prefix_count = workload_flags->prefix_count;
  workload_options.prefix_len = workload_flags->prefix_len;
  workload_options.conversations = workload_flags->conversations;
  workload_options.turns = workload_flags->turns;
  workload_options.max_model_len = info->max_model_len();
  workload_options.prompt_len = options->prompt_len;
  workload_options.output_len = options->output_len;
  workload_options.prompt_kind = options->prompt_kind;
  workload_options.count = options->workload_size;
  workload_options.vocab_size = info->vocab_size();
  workload_options.model = options->model;
  workload_options.seed = options->seed;
  auto workload = build_workload(workload_options, server_token_counter(server, options->model));
  if (!workload.ok()) return report_error(kCommand, workload.status());
  if (absl::Status s = check_lengths(*workload, info->max_model_len()); !s.ok()) {
    return report_error(kCommand, s);
  }

  BenchSetup setup;
  setup.server = options->runner.api == Api::kOpenAi
                     ? absl::StrCat("openai http://", options->runner.openai_address)
                     : absl::StrCat("grpc ", server.address());
  setup.model = info->id();
  setup.mode = describe_mode(options->runner);
  setup.concurrency = options->runner.concurrency;
  setup.request_rate = options->runner.request_rate;
  setup.prompt_len = options->prompt_len.to_string();
  setup.output_len = options->output_len.to_string();
  setup.prompt_kind = options->prompt_kind == PromptKind::kTokenIds ? "token-ids" : "words";
  setup.seed = options->seed;
  setup.workload = workload_name(workload_flags->kind);
  setup.workload_params = workload_params(*workload_flags);
  if (workload_flags->kind == WorkloadKind::kShareGpt) {
    setup.prompt_len = "sharegpt";
    setup.output_len = "sharegpt";
  }
  std::fprintf(stderr, "bench serve: %s at %s, %s, %s workload, prompt %s / output %s tokens\n",
               setup.model.c_str(), setup.server.c_str(), setup.mode.c_str(),
               setup.workload.c_str(), setup.prompt_len.c_str(), setup.output_len.c_str());

  const auto counters_before = read_counters(workload_flags->admin_address);
  BenchRunner runner(server, options->runner);
  RunResult result;
  {
    ProgressBar progress([&runner] { return runner.progress(); }, options->runner.num_requests,
                         options->runner.duration_seconds, stderr_is_tty());
    InterruptScope interrupt([&runner] { runner.stop(); });
    result = runner.run(*workload);
  }
  BenchReport report = make_report(result);
  if (counters_before) {
    if (const auto after = read_counters(workload_flags->admin_address)) {
      report.server = server_delta(*counters_before, *after);
    }
  }
  std::fputs(render_report(setup, report).c_str(), stdout);
  std::fflush(stdout);
  if (!options->json_path.empty()) {
    std::ofstream out(options->json_path);
    out << report_json(setup, report).dump(2) << "\n";
    if (!out) {
      return report_error(
          kCommand, absl::InternalError(absl::StrCat("cannot write --json=", options->json_path)));
    }
  }
  if (result.stopped) return kExitInterrupted;
  return report.failed > 0 || report.wrong_output_length > 0 ? kExitRequestsFailed : 0;
}

}  // namespace

int bench_command(int argc, char** argv) {
  const char* kUsage =
      "usage: tessera bench <benchmark> [flags]\n"
      "benchmarks:\n"
      "  serve     load-test a running tesserad (tessera bench serve --help)\n"
      "  kernels   time the GPU attention kernels (tessera bench kernels --help)\n";
  if (argc < 1) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string benchmark = argv[0];
  if (benchmark == "serve") return bench_serve_command(argc - 1, argv + 1);
  if (benchmark == "--help" || benchmark == "-h") return print_usage(kUsage);
  std::fprintf(stderr, "tessera bench: unknown benchmark '%s'\n%s", benchmark.c_str(), kUsage);
  return kExitUsage;
}

}  // namespace tessera::cli
