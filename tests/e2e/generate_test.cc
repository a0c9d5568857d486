// Generate and GenerateStream against the engine path that `tessera run` uses: same greedy text
// and token ids; the stream's chunk protocol; stop strings, token-id input, logprobs (and `tessera
// perplexity` against them); the other Generation methods, GetStatus and reflection.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/model_instance.h"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

// What `tessera run --temperature 0` does: one request on a one-sequence engine of its own.
struct Reference {
  std::string text;
  std::vector<int32_t> token_ids;
  FinishReason finish = FinishReason::kNone;
};

Reference engine_reference(const std::string& prompt, int max_tokens, bool chat) {
  static std::unique_ptr<ModelInstance> instance = [] {
    InstanceOptions options;
    options.engine.max_num_seqs = 1;
    options.limits.max_logit_rows = 1;
    options.kv_cache_bytes = 64ll << 20;
    auto loaded = ModelInstance::load(default_model_path(), options);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) (*loaded)->engine().start();
    return loaded.ok() ? *std::move(loaded) : nullptr;
  }();
  if (!instance) return {};
  ModelInstance& inst = *instance;
  auto request = std::make_shared<Request>();
  request->id = "reference";
  request->sampling.temperature = 0;
  request->stop.max_tokens = max_tokens;
  const ChatMessage message{"user", prompt};
  auto ids = chat ? inst.files().encode_chat({&message, 1}) : inst.tokenizer().encode(prompt);
  EXPECT_TRUE(ids.ok()) << ids.status();
  request->prompt = *ids;
  auto handle = inst.engine().submit(request);
  EXPECT_TRUE(handle.ok()) << handle.status();
  if (!handle.ok()) return {};
  Reference ref;
  RequestOutput out;
  do {
    out = handle->stream->next();
    ref.text += out.text;
    ref.token_ids.insert(ref.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
  } while (!out.finished);
  EXPECT_TRUE(out.status.ok()) << out.status;
  ref.finish = out.finish_reason;
  return ref;
}

class GenerateE2E : public SharedServerTest<GenerateE2E> {};

void expect_same_as_reference(const Reference& ref, const UnaryResult& unary, const StreamResult& stream) {
  ASSERT_TRUE(unary.status.ok()) << unary.status.error_message();
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  EXPECT_EQ(unary.response.text(), ref.text);
  EXPECT_EQ(std::vector<int32_t>(unary.response.token_ids().begin(), unary.response.token_ids().end()),
            ref.token_ids);
  EXPECT_EQ(stream.text, ref.text);
  EXPECT_EQ(stream.token_ids, ref.token_ids);
  EXPECT_EQ(unary.response.usage().completion_tokens(), static_cast<int>(ref.token_ids.size()));
  ASSERT_NE(stream.last(), nullptr);
  EXPECT_EQ(stream.last()->usage().completion_tokens(), static_cast<int>(ref.token_ids.size()));
  EXPECT_EQ(unary.response.finish_reason(), stream.last()->finish_reason());
  const v1::FinishReason expected = ref.finish == FinishReason::kEos ? v1::FINISH_REASON_EOS
                                                                     : v1::FINISH_REASON_LENGTH;
  EXPECT_EQ(unary.response.finish_reason(), expected);
}

TEST_F(GenerateE2E, GreedyPromptMatchesEnginePathUnaryAndStream) {
  const std::string prompt = "The capital of France is";
  const Reference ref = engine_reference(prompt, 16, false);
  ASSERT_FALSE(ref.token_ids.empty());
  v1::GenerateRequest request;
  request.set_prompt(prompt);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(16);
  const UnaryResult unary = generate(server_->generation(), request);
  const StreamResult stream = generate_stream(server_->generation(), request);
  expect_same_as_reference(ref, unary, stream);
  std::printf("greedy: %s\n", ref.text.c_str());
}

TEST_F(GenerateE2E, GreedyChatMatchesEnginePathUnaryAndStream) {
  const std::string content = "Write a haiku about the sea.";
  const Reference ref = engine_reference(content, 20, true);
  ASSERT_FALSE(ref.token_ids.empty());
  v1::GenerateRequest request;
  auto* m = request.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(content);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(20);
  expect_same_as_reference(ref, generate(server_->generation(), request),
                           generate_stream(server_->generation(), request));
}

// The `tessera` CLI itself, when it is built next to this test.
TEST_F(GenerateE2E, GreedyMatchesTesseraRunCli) {
  const std::string cli = TESSERA_CLI;
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << "tessera CLI not built: " << cli;
  const std::string prompt = "The capital of France is";
  const std::string command = cli + " run --model '" + default_model_path() +
                              "' --max-tokens 16 --temperature 0 '" + prompt + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string cli_text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) cli_text.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << command;
  const UnaryResult unary = generate(server_->generation(), greedy_request(prompt, 16));
  ASSERT_TRUE(unary.status.ok()) << unary.status.error_message();
  EXPECT_EQ(unary.response.text(), cli_text);
  const StreamResult stream = generate_stream(server_->generation(), greedy_request(prompt, 16));
  EXPECT_EQ(stream.text, cli_text);
}

// `tessera perplexity` against the daemon's own numbers: over a text shorter than one window, the
// CLI's mean negative log-likelihood is the mean over positions of -log p(token | prefix), which
// the daemon reports as the logprob of a token forced by logit_bias (logprobs are the model's own
// distribution's). Same weights and tokenizer; only the batch shapes differ (fp32 on the CPU).
TEST_F(GenerateE2E, PerplexityCliMatchesTheDaemonsLogprobs) {
  const std::string cli = TESSERA_CLI;
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << "tessera CLI not built: " << cli;
  const std::string text = "The quick brown fox jumps over the lazy dog. It was a sunny day.";
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string text_path = (dir / ("tessera_ppl_" + std::to_string(::getpid()) + ".txt")).string();
  const std::string json_path = text_path + ".json";
  std::ofstream(text_path) << text;
  const std::string command = cli + " perplexity --model '" + default_model_path() + "' --text '" +
                              text_path + "' --context 64 --json '" + json_path +
                              "' --threads 1 > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  nlohmann::json report;
  std::ifstream(json_path) >> report;
  std::filesystem::remove(text_path);
  std::filesystem::remove(json_path);

  v1::TokenizeRequest tok;
  tok.set_text(text);
  tok.set_add_special_tokens(true);
  v1::TokenizeResponse ids;
  grpc::ClientContext ctx;
  ASSERT_TRUE(server_->generation().Tokenize(&ctx, tok, &ids).ok());
  const int n = ids.token_ids_size();
  ASSERT_EQ(report["tokens"].get<int>(), n);
  ASSERT_EQ(report["scored"].get<int>(), n - 1);
  double nll = 0;
  for (int i = 1; i < n; ++i) {
    v1::GenerateRequest request = greedy_request("", 1, true);
    for (int j = 0; j < i; ++j) request.mutable_token_ids()->add_ids(ids.token_ids(j));
    (*request.mutable_sampling()->mutable_logit_bias())[ids.token_ids(i)] = 100.0f;
    request.set_logprobs(true);
    const UnaryResult r = generate(server_->generation(), request);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    ASSERT_EQ(r.response.token_ids_size(), 1);
    ASSERT_EQ(r.response.token_ids(0), ids.token_ids(i)) << "position " << i;
    nll -= r.response.logprobs(0).chosen().logprob();
  }
  const double daemon_ppl = std::exp(nll / (n - 1));
  EXPECT_NEAR(report["perplexity"].get<double>(), daemon_ppl, 1e-3 * daemon_ppl)
      << "mean nll: CLI " << report["mean_nll"].get<double>() << ", daemon " << nll / (n - 1);
}

// A --context past the model's positions is a usage error (exit 2) naming the flag and the most
// the model takes, not the daemon key it sets.
TEST_F(GenerateE2E, PerplexityContextPastTheModelsPositionsNamesTheFlag) {
  const std::string cli = TESSERA_CLI;
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << "tessera CLI not built: " << cli;
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string base = (dir / ("tessera_ppl_ctx_" + std::to_string(::getpid()))).string();
  const std::string text_path = base + ".txt", err_path = base + ".err";
  std::ofstream(text_path) << "A short text.";
  const std::string command = cli + " perplexity --model '" + default_model_path() + "' --text '" +
                              text_path + "' --context 100000 > /dev/null 2> '" + err_path + "'";
  const int status = std::system(command.c_str());
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  std::filesystem::remove(text_path);
  std::filesystem::remove(err_path);
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 2) << err.str();
  EXPECT_NE(err.str().find("--context 100000 exceeds the model's 8192 positions"),
            std::string::npos)
      << err.str();
}

TEST_F(GenerateE2E, StreamChunksOutcomeOnlyOnTheLastAndRequestIdEchoed) {
  v1::GenerateRequest request = greedy_request("Once upon a time", 8, /*exact=*/true);
  request.set_request_id("chunk-test-1");
  const StreamResult stream = generate_stream(server_->generation(), request);
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  ASSERT_GE(stream.chunks.size(), 2u);
  for (size_t i = 0; i + 1 < stream.chunks.size(); ++i) {
    EXPECT_EQ(stream.chunks[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED) << i;
    EXPECT_FALSE(stream.chunks[i].has_usage()) << i;
    EXPECT_EQ(stream.chunks[i].request_id(), "chunk-test-1");
  }
  const v1::GenerateStreamChunk& last = *stream.last();
  EXPECT_EQ(last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(last.usage().completion_tokens(), 8);
  EXPECT_EQ(stream.token_ids.size(), 8u);
  EXPECT_GT(last.usage().prompt_tokens(), 0);
  EXPECT_GE(last.timings().time_to_first_token_seconds(), last.timings().queue_seconds());
  EXPECT_GE(last.timings().total_seconds(), last.timings().time_to_first_token_seconds());
  EXPECT_GT(last.timings().total_seconds(), 0);
}

TEST_F(GenerateE2E, LogprobsPerTokenWithTopAlternatives) {
  v1::GenerateRequest request = greedy_request("The quick brown fox", 6, true);
  request.set_top_logprobs(3);
  const UnaryResult r = generate(server_->generation(), request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.response.logprobs_size(), 6);
  for (int i = 0; i < 6; ++i) {
    const v1::GeneratedTokenLogprobs& lp = r.response.logprobs(i);
    EXPECT_EQ(lp.chosen().token_id(), r.response.token_ids(i));
    EXPECT_LE(lp.chosen().logprob(), 0.0f);
    ASSERT_EQ(lp.top_size(), 3);
    EXPECT_EQ(lp.top(0).token_id(), lp.chosen().token_id()) << "greedy picks the most likely";
    EXPECT_GE(lp.top(0).logprob(), lp.top(1).logprob());
    EXPECT_FALSE(lp.chosen().token().empty());
  }
}

TEST_F(GenerateE2E, StopStringIsCutAndEndsWithStop) {
  const UnaryResult full = generate(server_->generation(), greedy_request("The capital of France is", 16, true));
  ASSERT_TRUE(full.status.ok());
  const std::string& text = full.response.text();
  ASSERT_GT(text.size(), 12u) << text;
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t cut = text.find(stop);
  v1::GenerateRequest request = greedy_request("The capital of France is", 16, true);
  request.mutable_stopping()->add_stop(stop);
  const UnaryResult unary = generate(server_->generation(), request);
  ASSERT_TRUE(unary.status.ok());
  EXPECT_EQ(unary.response.text(), text.substr(0, cut)) << "stop " << stop;
  EXPECT_EQ(unary.response.finish_reason(), v1::FINISH_REASON_STOP);
  const StreamResult stream = generate_stream(server_->generation(), request);
  ASSERT_TRUE(stream.status.ok());
  EXPECT_EQ(stream.text, text.substr(0, cut));
  EXPECT_EQ(stream.last()->finish_reason(), v1::FINISH_REASON_STOP);
}

TEST_F(GenerateE2E, TokenIdInputMatchesTextInput) {
  v1::TokenizeRequest tok;
  tok.set_text("The capital of France is");
  tok.set_add_special_tokens(true);
  v1::TokenizeResponse ids;
  grpc::ClientContext ctx;
  ASSERT_TRUE(server_->generation().Tokenize(&ctx, tok, &ids).ok());
  ASSERT_GT(ids.token_ids_size(), 0);
  ASSERT_EQ(ids.tokens_size(), ids.token_ids_size());
  v1::GenerateRequest by_ids = greedy_request("", 10, true);
  by_ids.mutable_token_ids()->mutable_ids()->CopyFrom(ids.token_ids());
  const UnaryResult a = generate(server_->generation(), by_ids);
  const UnaryResult b = generate(server_->generation(), greedy_request("The capital of France is", 10, true));
  ASSERT_TRUE(a.status.ok()) << a.status.error_message();
  ASSERT_TRUE(b.status.ok());
  EXPECT_EQ(a.response.text(), b.response.text());
  EXPECT_EQ(a.response.usage().prompt_tokens(), ids.token_ids_size());
  EXPECT_EQ(b.response.usage().prompt_tokens(), ids.token_ids_size());
}

TEST_F(GenerateE2E, ModelsTokenizeStatusHealthAndReflection) {
  v1::ListModelsResponse models;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(server_->generation().ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  }
  ASSERT_EQ(models.models_size(), 1);
  const v1::ModelInfo& info = models.models(0);
  EXPECT_EQ(info.id(), "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.vocab_size(), 49152);
  EXPECT_EQ(info.num_layers(), 30);
  EXPECT_EQ(info.max_model_len(), 2048);
  EXPECT_EQ(info.backend(), "cpu");
  EXPECT_TRUE(info.has_chat_template());
  EXPECT_GT(info.kv_cache_blocks(), 0);
  EXPECT_EQ(info.kv_block_size(), 16);
  EXPECT_EQ(info.max_num_seqs(), 256);
  EXPECT_GT(info.weight_bytes(), 0);

  v1::GetModelInfoRequest by_name;
  by_name.set_model("SmolLM2-135M-Instruct.Q4_1");
  v1::ModelInfo same;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(server_->generation().GetModelInfo(&ctx, by_name, &same).ok());
  }
  EXPECT_EQ(same.id(), info.id());
  by_name.set_model("llama-70b");
  {
    grpc::ClientContext ctx;
    const grpc::Status s = server_->generation().GetModelInfo(&ctx, by_name, &same);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("model"), std::string::npos) << s.error_message();
  }

  v1::TokenizeRequest tok;
  auto* m = tok.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  v1::TokenizeResponse chat_ids;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(server_->generation().Tokenize(&ctx, tok, &chat_ids).ok());
  }
  std::string rendered;
  for (const std::string& t : chat_ids.tokens()) rendered += t;
  EXPECT_NE(rendered.find("hi"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("user"), std::string::npos) << rendered;

  const v1::ServerStatus status = server_->status();
  EXPECT_EQ(status.state(), "serving");
  EXPECT_EQ(status.kv_cache_blocks_total(), info.kv_cache_blocks());
  EXPECT_GT(status.uptime_seconds(), 0);

  EXPECT_EQ(health_check(*server_->channel(), ""), kServing);
  EXPECT_EQ(health_check(*server_->channel(), "tessera.v1.Generation"), kServing);

  const std::vector<std::string> services = reflection_services(*server_->channel());
  auto has = [&](const std::string& s) { return std::find(services.begin(), services.end(), s) != services.end(); };
  EXPECT_TRUE(has("tessera.v1.Generation"));
  EXPECT_TRUE(has("tessera.v1.Admin"));
  EXPECT_TRUE(has("grpc.health.v1.Health"));
}

}  // namespace
}  // namespace tessera::e2e
