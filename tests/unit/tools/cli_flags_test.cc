// The shared flag parsing: Args, the generation flags, the connection flags and bench serve's.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/bench_options.h"
#include "tools/cli_args.h"
#include "tools/generate_request.h"
#include "tools/generation_flags.h"
#include "tools/server_connection.h"

namespace tessera::cli {
namespace {

// Args::parse over a list of strings.
absl::StatusOr<Args> parse(std::vector<std::string> words, const std::set<std::string>& values,
                           const std::set<std::string>& bools) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return Args::parse(static_cast<int>(argv.size()), argv.data(), values, bools);
}

absl::StatusOr<Args> parse_generation(std::vector<std::string> words) {
  return parse(std::move(words),
               merge_flags({sampling_value_flags(), server_generation_value_flags(),
                            connection_value_flags()}),
               merge_flags({server_generation_bool_flags(), connection_bool_flags()}));
}

TEST(Args, ValuesBoolsPositionalsAndRepeats) {
  auto args = parse({"--a", "1", "--b=2", "--flag", "pos", "--a", "3", "--", "--not-a-flag"},
                    {"a", "b"}, {"flag"});
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->get("a"), "3");  // the last one wins
  EXPECT_EQ(args->get_all("a"), (std::vector<std::string>{"1", "3"}));
  EXPECT_EQ(args->get("b"), "2");
  EXPECT_TRUE(args->has("flag"));
  EXPECT_FALSE(args->has("other"));
  EXPECT_EQ(args->positional(), (std::vector<std::string>{"pos", "--not-a-flag"}));
  EXPECT_TRUE(args->get_all("missing").empty());
}

TEST(Args, Errors) {
  EXPECT_FALSE(parse({"--nope"}, {"a"}, {}).ok());
  EXPECT_FALSE(parse({"--a"}, {"a"}, {}).ok());          // needs a value
  EXPECT_FALSE(parse({"--flag=1"}, {}, {"flag"}).ok());  // takes none
  auto args = parse({"--a", "x"}, {"a"}, {});
  ASSERT_TRUE(args.ok());
  EXPECT_FALSE(args->get_int("a", 0).ok());
  EXPECT_FALSE(args->get_double("a", 0).ok());
}

TEST(GenerationFlags, DefaultsMatchRun) {
  auto args = parse_generation({});
  ASSERT_TRUE(args.ok());
  auto f = read_generation_flags(*args);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->max_tokens, 256);
  EXPECT_FLOAT_EQ(f->temperature, 0.7f);
  EXPECT_EQ(f->top_k, 0);
  EXPECT_FLOAT_EQ(f->top_p, 1.0f);
  EXPECT_FALSE(f->seed.has_value());
  EXPECT_FALSE(f->logprobs.has_value());
  EXPECT_FALSE(f->ignore_eos);
  EXPECT_TRUE(f->stop.empty());
}

TEST(GenerationFlags, EveryFlagReachesTheRequest) {
  auto args = parse_generation({"--max-tokens",
                                "9",
                                "--temperature",
                                "0",
                                "--top-k",
                                "5",
                                "--top-p",
                                "0.5",
                                "--min-p",
                                "0.1",
                                "--seed",
                                "42",
                                "--min-tokens",
                                "2",
                                "--repetition-penalty",
                                "1.2",
                                "--frequency-penalty",
                                "-1",
                                "--presence-penalty",
                                "0.5",
                                "--stop",
                                "\n\n",
                                "--stop",
                                "END",
                                "--ignore-eos",
                                "--logprobs",
                                "3"});
  ASSERT_TRUE(args.ok()) << args.status();
  auto f = read_generation_flags(*args);
  ASSERT_TRUE(f.ok()) << f.status();
  v1::GenerateRequest r;
  apply_generation_flags(*f, r);
  EXPECT_EQ(r.stopping().max_tokens(), 9);
  EXPECT_EQ(r.stopping().min_tokens(), 2);
  EXPECT_TRUE(r.sampling().has_temperature());
  EXPECT_FLOAT_EQ(r.sampling().temperature(), 0.0f);
  EXPECT_EQ(r.sampling().top_k(), 5);
  EXPECT_FLOAT_EQ(r.sampling().top_p(), 0.5f);
  EXPECT_FLOAT_EQ(r.sampling().min_p(), 0.1f);
  ASSERT_TRUE(r.sampling().has_seed());
  EXPECT_EQ(r.sampling().seed(), 42u);
  EXPECT_FLOAT_EQ(r.sampling().repetition_penalty(), 1.2f);
  EXPECT_FLOAT_EQ(r.sampling().frequency_penalty(), -1.0f);
  EXPECT_FLOAT_EQ(r.sampling().presence_penalty(), 0.5f);
  ASSERT_EQ(r.stopping().stop_size(), 2);
  EXPECT_EQ(r.stopping().stop(0), "\n\n");
  EXPECT_EQ(r.stopping().stop(1), "END");
  EXPECT_TRUE(r.stopping().ignore_eos());
  EXPECT_TRUE(r.logprobs());
  EXPECT_EQ(r.top_logprobs(), 3);
}

TEST(GenerationFlags, NegativeSeedMeansRandom) {
  auto args = parse_generation({"--seed", "-1"});
  ASSERT_TRUE(args.ok());
  auto f = read_generation_flags(*args);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->seed.has_value());
}

TEST(GenerationFlags, RangeErrorsNameTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-tokens", "0"}, "--max-tokens"},
      {{"--max-tokens", "9999999999"}, "--max-tokens"},
      {{"--temperature", "-1"}, "--temperature"},
      {{"--temperature", "nan"}, "--temperature"},
      {{"--top-k", "-1"}, "--top-k"},
      {{"--top-p", "0"}, "--top-p"},
      {{"--top-p", "1.5"}, "--top-p"},
      {{"--min-p", "2"}, "--min-p"},
      {{"--min-tokens", "300"}, "--min-tokens"},
      {{"--repetition-penalty", "0"}, "--repetition-penalty"},
      {{"--frequency-penalty", "3"}, "--frequency-penalty"},
      {{"--presence-penalty", "-3"}, "--presence-penalty"},
      {{"--logprobs", "21"}, "--logprobs"},
      {{"--stop", ""}, "--stop"},
      {{"--top-k", "x"}, "--top-k"},
  };
  for (const auto& [words, flag] : cases) {
    auto args = parse_generation(words);
    ASSERT_TRUE(args.ok()) << words[0];
    auto f = read_generation_flags(*args);
    ASSERT_FALSE(f.ok()) << words[0] << " " << words[1];
    EXPECT_NE(std::string(f.status().message()).find(flag), std::string::npos) << f.status();
  }
}

TEST(ConnectionFlags, DefaultsAndTls) {
  auto plain = parse_generation({});
  ASSERT_TRUE(plain.ok());
  auto c = read_connection_flags(*plain);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->address, "127.0.0.1:50051");
  EXPECT_FALSE(c->tls);

  auto tls = parse_generation({"--server", "gpu-host:9000", "--tls-ca", "/ca.pem"});
  ASSERT_TRUE(tls.ok());
  c = read_connection_flags(*tls);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->address, "gpu-host:9000");
  EXPECT_TRUE(c->tls);

  auto half_mtls = parse_generation({"--tls-cert", "/c.pem"});
  ASSERT_TRUE(half_mtls.ok());
  EXPECT_FALSE(read_connection_flags(*half_mtls).ok());
}

TEST(ConnectionFlags, ApiKeyFromTheFlagElseTheEnvironment) {
  const auto env = [](const char* name) -> const char* {
    return std::string(name) == "TESSERA_API_KEY" ? "from-env" : nullptr;
  };
  const auto no_env = [](const char*) -> const char* { return nullptr; };
  auto none = parse_generation({});
  ASSERT_TRUE(none.ok());
  auto c = read_connection_flags(*none, no_env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->api_key, "");
  c = read_connection_flags(*none, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->api_key, "from-env");

  auto flag = parse_generation({"--api-key", "from-flag"});
  ASSERT_TRUE(flag.ok());
  c = read_connection_flags(*flag, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->api_key, "from-flag");

  auto empty = parse_generation({"--api-key", ""});
  ASSERT_TRUE(empty.ok());
  c = read_connection_flags(*empty, env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("--api-key"), std::string::npos);
}

TEST(ConnectionFlags, MissingTlsFileIsAClearError) {
  ConnectionOptions options;
  options.tls = true;
  options.ca_file = "/nonexistent/ca.pem";
  auto connection = ServerConnection::open(options);
  ASSERT_FALSE(connection.ok());
  EXPECT_NE(std::string(connection.status().message()).find("/nonexistent/ca.pem"),
            std::string::npos);
}

absl::StatusOr<BenchServeOptions> bench_flags(std::vector<std::string> words) {
  auto args =
      parse(std::move(words), merge_flags({bench_serve_value_flags(), connection_value_flags()}),
            connection_bool_flags());
  if (!args.ok()) return args.status();
  return read_bench_serve_flags(*args);
}

TEST(BenchServeFlags, Modes) {
  auto closed = bench_flags({});
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->runner.concurrency, 1);
  EXPECT_TRUE(std::isinf(closed->runner.request_rate));
  EXPECT_EQ(closed->runner.num_requests, 100u);
  EXPECT_EQ(closed->workload_size, 100u);
  EXPECT_EQ(describe_mode(closed->runner), "closed loop, concurrency 1");

  auto open = bench_flags({"--request-rate", "4", "--num-requests", "10"});
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->runner.concurrency, 0);  // no cap unless asked
  EXPECT_DOUBLE_EQ(open->runner.request_rate, 4);
  EXPECT_EQ(describe_mode(open->runner), "open loop, 4 req/s (Poisson)");

  auto capped = bench_flags({"--request-rate", "2.5", "--concurrency", "16"});
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->runner.concurrency, 16);
  EXPECT_EQ(describe_mode(capped->runner), "open loop, 2.5 req/s (Poisson), at most 16 in flight");

  auto timed = bench_flags({"--duration", "30", "--concurrency", "8", "--prompt-len",
                            "uniform:32:256", "--output-len", "normal:128:32", "--prompt-kind",
                            "words", "--json", "/tmp/x.json", "--seed", "5"});
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_EQ(timed->runner.num_requests, 0u);  // until the duration
  EXPECT_DOUBLE_EQ(timed->runner.duration_seconds, 30);
  EXPECT_EQ(timed->workload_size, 1000u);
  EXPECT_EQ(timed->prompt_len.to_string(), "uniform:32:256");
  EXPECT_EQ(timed->output_len.to_string(), "normal:128:32");
  EXPECT_EQ(timed->prompt_kind, PromptKind::kWords);
  EXPECT_EQ(timed->json_path, "/tmp/x.json");
  EXPECT_EQ(timed->seed, 5u);
}

TEST(BenchServeFlags, Api) {
  auto grpc = bench_flags({});
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  EXPECT_EQ(grpc->runner.api, Api::kGrpc);
  auto openai = bench_flags({"--api", "openai"});
  ASSERT_TRUE(openai.ok()) << openai.status();
  EXPECT_EQ(openai->runner.api, Api::kOpenAi);
  EXPECT_EQ(openai->runner.openai_address, "127.0.0.1:8000");
  auto elsewhere = bench_flags({"--api", "openai", "--openai-server", "10.0.0.2:9000"});
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->runner.openai_address, "10.0.0.2:9000");
  EXPECT_FALSE(bench_flags({"--api", "rest"}).ok());
  EXPECT_FALSE(bench_flags({"--openai-server", "10.0.0.2:9000"}).ok());  // needs --api openai
  EXPECT_FALSE(bench_flags({"--api", "openai", "--timeout", "5"}).ok());  // gRPC deadlines only
}

TEST(BenchServeFlags, Errors) {
  for (const std::vector<std::string>& words :
       std::vector<std::vector<std::string>>{{"--concurrency", "0"},
                                             {"--request-rate", "0"},
                                             {"--request-rate", "-2"},
                                             {"--num-requests", "0"},
                                             {"--duration", "0"},
                                             {"--prompt-len", "uniform:9:1"},
                                             {"--output-len", "x"},
                                             {"--prompt-kind", "poems"},
                                             {"--seed", "-1"},
                                             {"--timeout", "-1"}}) {
    EXPECT_FALSE(bench_flags(words).ok()) << words[0] << " " << words[1];
  }
}

}  // namespace
}  // namespace tessera::cli
