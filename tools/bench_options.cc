#include "tools/bench_options.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::cli {

namespace {

constexpr int64_t kDefaultRequests = 100;
constexpr size_t kTimedWorkloadSize = 1000;
constexpr int64_t kMaxConcurrency = 100000;

}  // namespace

const std::set<std::string>& bench_serve_value_flags() {
  static const std::set<std::string> flags = {
      "model",      "concurrency", "request-rate", "num-requests", "duration", "prompt-len",
      "output-len", "prompt-kind", "seed",         "json",         "timeout",
      "api",        "openai-server"};
  return flags;
}

const char* bench_serve_usage() {
  return "usage: tessera bench serve [flags]\n"
         "  Load-tests tesserad with synthetic streaming requests (ignore_eos, exact output\n"
         "  lengths) and reports TTFT, ITL, TPOT and end-to-end latency percentiles, request and\n"
         "  token throughput, and errors. Exits 3 when any request failed or came back with the\n"
         "  wrong number of tokens, 130 when interrupted (Ctrl-C: in-flight calls are cancelled).\n"
         "      --concurrency N         closed loop: N requests in flight (1)\n"
         "      --request-rate R        open loop: Poisson arrivals, R requests/s; with\n"
         "                              --concurrency, at most N in flight\n"
         "      --num-requests N        requests to send (100 unless --duration is given)\n"
         "      --duration S            stop sending after S seconds; running requests finish\n"
         "      --prompt-len DIST       prompt tokens: N, uniform:LO:HI, normal:MEAN:STDDEV (128)\n"
         "      --output-len DIST       tokens to generate, same forms (128)\n"
         "      --prompt-kind KIND      token-ids (exact lengths) or words (English words,\n"
         "                              fitted with the server's tokenizer) (token-ids)\n"
         "      --seed S                workload and arrival seed (0)\n"
         "      --timeout S             deadline of each request, in seconds (none)\n"
         "      --json FILE             also write the results as JSON\n"
         "      --model ID              the model (ListModels' id); optional with one model\n"
         "      --api grpc|openai       drive GenerateStream (grpc) or streamed /v1/completions\n"
         "                              on the OpenAI port (openai); the workload is built the\n"
         "                              same way through --server's gRPC either way (grpc)\n"
         "      --openai-server H:P     the OpenAI port, plain HTTP (127.0.0.1:8000)\n";
}

absl::StatusOr<BenchServeOptions> read_bench_serve_flags(const Args& args) {
  BenchServeOptions o;
  auto connection = read_connection_flags(args);
  if (!connection.ok()) return connection.status();
  o.connection = *std::move(connection);
  o.model = args.get("model");
  o.json_path = args.get("json");

  auto concurrency = args.get_int("concurrency", 1);
  auto rate = args.get_double("request-rate", INFINITY);
  auto num_requests = args.get_int("num-requests", args.has("duration") ? 0 : kDefaultRequests);
  auto duration = args.get_double("duration", 0);
  auto seed = args.get_int("seed", 0);
  auto timeout = args.get_double("timeout", 0);
  for (const absl::Status& st : {concurrency.status(), rate.status(), num_requests.status(),
                                 duration.status(), seed.status(), timeout.status()}) {
    if (!st.ok()) return st;
  }
  if (*concurrency < 1 || *concurrency > kMaxConcurrency) {
    return absl::InvalidArgumentError(
        absl::StrCat("--concurrency must be in [1, ", kMaxConcurrency, "]"));
  }
  if (!(*rate > 0))
    return absl::InvalidArgumentError("--request-rate must be > 0 (requests per second)");
  if (args.has("num-requests") && *num_requests < 1) {
    return absl::InvalidArgumentError("--num-requests must be >= 1");
  }
  if (args.has("duration") && !(*duration > 0)) {
    return absl::InvalidArgumentError("--duration must be > 0 (seconds)");
  }
  if (*seed < 0) return absl::InvalidArgumentError("--seed must be >= 0");
  if (!(*timeout >= 0)) return absl::InvalidArgumentError("--timeout must be >= 0");
  const std::string api = args.get("api", "grpc");
  if (api == "openai") {
    o.runner.api = Api::kOpenAi;
    o.runner.openai_address = args.get("openai-server", "127.0.0.1:8000");
    o.runner.api_key = o.connection.api_key;
    if (args.has("timeout")) {
      return absl::InvalidArgumentError("--timeout applies to --api grpc only");
    }
  } else if (api != "grpc") {
    return absl::InvalidArgumentError(absl::StrCat("--api=", api, ": expected grpc or openai"));
  } else if (args.has("openai-server")) {
    return absl::InvalidArgumentError("--openai-server needs --api openai");
  }

  auto prompt_len = LengthDistribution::parse(args.get("prompt-len", "128"));
  if (!prompt_len.ok()) return prompt_len.status();
  auto output_len = LengthDistribution::parse(args.get("output-len", "128"));
  if (!output_len.ok()) return output_len.status();
  o.prompt_len = *prompt_len;
  o.output_len = *output_len;
  const std::string kind = args.get("prompt-kind", "token-ids");
  if (kind == "token-ids") {
    o.prompt_kind = PromptKind::kTokenIds;
  } else if (kind == "words") {
    o.prompt_kind = PromptKind::kWords;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--prompt-kind=", kind, ": expected token-ids or words"));
  }

  o.seed = static_cast<uint64_t>(*seed);
  const bool open_loop = std::isfinite(*rate);
  o.runner.request_rate = *rate;
  // An open loop sends on schedule; only an explicit --concurrency caps it.
  o.runner.concurrency =
      open_loop && !args.has("concurrency") ? 0 : static_cast<int32_t>(*concurrency);
  o.runner.num_requests = static_cast<size_t>(*num_requests);
  o.runner.duration_seconds = *duration;
  o.runner.timeout_seconds = *timeout;
  o.runner.seed = o.seed ^ 0x9E3779B97F4A7C15ull;  // arrivals: a stream apart from the workload's
  o.workload_size = o.runner.num_requests > 0 ? o.runner.num_requests : kTimedWorkloadSize;
  return o;
}

std::string describe_mode(const RunnerOptions& runner) {
  if (!std::isfinite(runner.request_rate)) {
    return absl::StrCat("closed loop, concurrency ", runner.concurrency);
  }
  std::string mode = absl::StrFormat("open loop, %g req/s (Poisson)", runner.request_rate);
  if (runner.concurrency > 0)
    absl::StrAppend(&mode, ", at most ", runner.concurrency, " in flight");
  return mode;
}

}  // namespace tessera::cli
