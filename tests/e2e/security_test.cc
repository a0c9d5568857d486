// Secure by default: one API key for gRPC (Generation and Admin; health stays open) and the
// OpenAI API, the CLI sending it, host details only for the admin token, user strings cut short
// in errors, server reflection that can be turned off, the last chunk of a stream a drain
// cancels, and a Tokenize answer larger than the request limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "nlohmann/json.hpp"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/e2e/test_server.h"
#include "tests/unit/metrics/http_test_client.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using tessera::testing::http_request;
using tessera::testing::HttpReply;

constexpr char kApiKey[] = "k3y-for-tests";
constexpr char kAdminToken[] = "adm1n-for-tests";

// A context carrying "authorization: <value>" (none when empty) and a 60 s deadline.
void prepare(grpc::ClientContext& ctx, const std::string& authorization) {
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);
}

// Every Generation and Admin method, called with `authorization`; the statuses by method name.
std::map<std::string, grpc::Status> call_every_method(TestServer& server,
                                                      const std::string& authorization) {
  std::map<std::string, grpc::Status> out;
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::GenerateResponse r;
    out["Generate"] = server.generation().Generate(&ctx, greedy_request("Hi", 2), &r);
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    auto reader = server.generation().GenerateStream(&ctx, greedy_request("Hi", 2));
    v1::GenerateStreamChunk chunk;
    while (reader->Read(&chunk)) {
    }
    out["GenerateStream"] = reader->Finish();
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::TokenizeRequest request;
    request.set_text("Hello");
    v1::TokenizeResponse r;
    out["Tokenize"] = server.generation().Tokenize(&ctx, request, &r);
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::ListModelsResponse r;
    out["ListModels"] = server.generation().ListModels(&ctx, v1::ListModelsRequest(), &r);
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::ModelInfo r;
    out["GetModelInfo"] = server.generation().GetModelInfo(&ctx, v1::GetModelInfoRequest(), &r);
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::ServerStatus r;
    out["GetStatus"] = server.admin().GetStatus(&ctx, v1::GetStatusRequest(), &r);
  }
  {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    auto reader = server.admin().Warmup(&ctx, v1::WarmupRequest());
    v1::WarmupProgress m;
    while (reader->Read(&m)) {
    }
    out["Warmup"] = reader->Finish();
  }
  return out;
}

// Runs `command` in a shell; its exit status and its stdout and stderr together.
std::pair<int, std::string> run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  return {pclose(pipe), out};
}

TEST(SecurityE2E, TheApiKeyGuardsGenerationAndAdminButNotHealth) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.api_key = kApiKey;
  config.admin_token = kAdminToken;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  const std::string bearer_key = std::string("Bearer ") + kApiKey;

  for (const auto& [method, status] : call_every_method(*server, "")) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_NE(status.error_message().find("requires an API key"), std::string::npos)
        << method << ": " << status.error_message();
  }
  for (const auto& [method, status] : call_every_method(*server, "Bearer not-the-key")) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_NE(status.error_message().find("wrong API key"), std::string::npos)
        << method << ": " << status.error_message();
  }
  for (const auto& [method, status] : call_every_method(*server, bearer_key)) {
    if (method == "Warmup") {
      // Past the key, Warmup still wants the admin token.
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
      EXPECT_NE(status.error_message().find("admin token"), std::string::npos) << status.error_message();
    } else {
      EXPECT_TRUE(status.ok()) << method << ": " << status.error_message();
    }
  }
  for (const auto& [method, status] :
       call_every_method(*server, std::string("Bearer ") + kAdminToken)) {
    if (method == "Warmup") {
      // Authorized; the tuning mode (off) is what refuses it now.
      EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    } else {
      EXPECT_TRUE(status.ok()) << method << ": " << status.error_message();
    }
  }
  // Health needs no key: load balancers and kubelets probe it.
  EXPECT_EQ(health_check(*server->channel(), ""), kServing);
  EXPECT_EQ(health_check(*server->channel(), "tessera.v1.Generation"), kServing);

  // The same key guards the OpenAI API, and the admin token passes there as on gRPC.
  const int openai = server->daemon().openai_port();
  EXPECT_EQ(http_request(openai, "GET", "/v1/models").value_or(HttpReply{}).status, 401);
  EXPECT_EQ(http_request(openai, "GET", "/v1/models",
                         "Authorization: " + bearer_key + "\r\n").value_or(HttpReply{}).status,
            200);
  EXPECT_EQ(http_request(openai, "GET", "/v1/models",
                         std::string("Authorization: Bearer ") + kAdminToken + "\r\n")
                .value_or(HttpReply{})
                .status,
            200);
  EXPECT_EQ(http_request(openai, "GET", "/v1/models", "Authorization: Bearer nope\r\n")
                .value_or(HttpReply{})
                .status,
            401);

  // The CLI sends it from --api-key or $TESSERA_API_KEY.
  const std::string cli = TESSERA_CLI;
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << "tessera CLI not built: " << cli;
  const std::string models = cli + " models --server " + server->address();
  const auto [no_key_rc, no_key_out] = run("env -u TESSERA_API_KEY " + models);
  EXPECT_NE(no_key_rc, 0) << no_key_out;
  EXPECT_NE(no_key_out.find("UNAUTHENTICATED"), std::string::npos) << no_key_out;
  const auto [flag_rc, flag_out] = run(models + " --api-key " + kApiKey);
  EXPECT_EQ(flag_rc, 0) << flag_out;
  EXPECT_NE(flag_out.find("SmolLM2"), std::string::npos) << flag_out;
  const auto [env_rc, env_out] = run(std::string("TESSERA_API_KEY=") + kApiKey + " " + models);
  EXPECT_EQ(env_rc, 0) << env_out;
  const auto [gen_rc, gen_out] =
      run(std::string("TESSERA_API_KEY=") + kApiKey + " " + cli + " generate --server " +
          server->address() + " --temperature 0 --max-tokens 4 'Hello'");
  EXPECT_EQ(gen_rc, 0) << gen_out;
  const auto [bench_rc, bench_out] =
      run(cli + " bench serve --server " + server->address() + " --api-key " + kApiKey +
          " --num-requests 2 --concurrency 2 --prompt-len 8 --output-len 4");
  EXPECT_EQ(bench_rc, 0) << bench_out;
}

TEST(SecurityE2E, HostDetailsAreForTheAdminTokenOnly) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.admin_token = kAdminToken;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  auto info_as = [&](const std::string& authorization) {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::ModelInfo info;
    const grpc::Status s = server->generation().GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  };
  auto listed_as = [&](const std::string& authorization) {
    grpc::ClientContext ctx;
    prepare(ctx, authorization);
    v1::ListModelsResponse r;
    const grpc::Status s = server->generation().ListModels(&ctx, v1::ListModelsRequest(), &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r.models_size() == 1 ? r.models(0) : v1::ModelInfo();
  };
  for (const v1::ModelInfo& info :
       {info_as(""), info_as("Bearer wrong"), listed_as(""), listed_as("Bearer wrong")}) {
    EXPECT_EQ(info.path(), config.model) << "the path as the operator gave it";
    ASSERT_GE(info.placement_size(), 1);
    for (const v1::DevicePlacement& p : info.placement()) {
      EXPECT_EQ(p.name(), "") << "a device name for an anonymous caller";
      EXPECT_EQ(p.allowed_bytes(), 0) << "host memory for an anonymous caller";
      EXPECT_GT(p.kv_capacity_tokens(), 0) << "capacity is public";
    }
    EXPECT_GT(info.kv_cache_blocks(), 0);
    EXPECT_GT(info.weight_bytes(), 0);
  }
  const std::string admin = std::string("Bearer ") + kAdminToken;
  for (const v1::ModelInfo& info : {info_as(admin), listed_as(admin)}) {
    EXPECT_EQ(info.path(), config.model);
    ASSERT_GE(info.placement_size(), 1);
    EXPECT_NE(info.placement(0).name(), "");
    EXPECT_GT(info.placement(0).allowed_bytes(), 0);
  }
}

TEST(SecurityE2E, EchoedModelNamesAreCutInBothApis) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  const std::string name(20000, 'n');
  v1::GenerateRequest request = greedy_request("Hi", 2);
  request.set_model(name);
  const UnaryResult r = generate(server->generation(), request);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(r.status.error_message().size(), 400u);
  EXPECT_NE(r.status.error_message().find(std::string(256, 'n') + "...\""), std::string::npos)
      << r.status.error_message();

  const std::string body = json{{"model", name}, {"prompt", "Hi"}, {"max_tokens", 2}}.dump();
  const HttpReply reply = http_request(server->daemon().openai_port(), "POST", "/v1/completions",
                                       "Content-Type: application/json\r\n", body)
                              .value_or(HttpReply{});
  EXPECT_EQ(reply.status, 404) << reply.body.substr(0, 300);
  EXPECT_LT(reply.body.size(), 700u);
  EXPECT_NE(reply.body.find(std::string(256, 'n') + "..."), std::string::npos) << reply.body;

  // An unknown JSON field's name is cut the same way.
  const std::string long_field(5000, 'f');
  const HttpReply field = http_request(server->daemon().openai_port(), "POST", "/v1/completions",
                                       "Content-Type: application/json\r\n",
                                       json{{"prompt", "Hi"}, {long_field, 1}}.dump())
                              .value_or(HttpReply{});
  EXPECT_EQ(field.status, 400);
  EXPECT_LT(field.body.size(), 900u) << field.body.substr(0, 300);
}

// The warnings a server logs at start, caught from the default logger.
std::vector<std::string> start_warnings(const server::DaemonConfig& config) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  sink->set_level(spdlog::level::warn);
  sink->set_pattern("%v");
  spdlog::default_logger()->sinks().push_back(sink);
  { auto server = TestServer::start(config, /*load=*/false); }
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::find(sinks.begin(), sinks.end(), sink));
  return sink->last_formatted();
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(SecurityE2E, AListenerOffLoopbackWithoutACredentialIsWarnedAbout) {
  server::DaemonConfig config = test_config();
  config.listen = "0.0.0.0:0";
  config.openai_listen = "0.0.0.0:0";
  std::vector<std::string> w = start_warnings(config);
  EXPECT_TRUE(any_contains(w, "gRPC (tessera.v1.Generation and Admin) on 0.0.0.0:")) << w.size();
  EXPECT_TRUE(any_contains(w, "is open to anyone who can reach it: no API key"));
  EXPECT_TRUE(any_contains(w, "and no mTLS (tls_client_ca)"));
  EXPECT_TRUE(any_contains(w, "the OpenAI API on 0.0.0.0:"));
  EXPECT_FALSE(any_contains(w, "admin listener")) << "the admin listener is on loopback";

  config.api_key = kApiKey;
  w = start_warnings(config);
  EXPECT_FALSE(any_contains(w, "is open to anyone")) << (w.empty() ? "" : w.front());

  server::DaemonConfig local = test_config();  // every listener on 127.0.0.1
  w = start_warnings(local);
  EXPECT_FALSE(any_contains(w, "is open to anyone")) << (w.empty() ? "" : w.front());
}

TEST(SecurityE2E, ReflectionCanBeTurnedOff) {
  server::DaemonConfig config = test_config();
  {
    auto server = TestServer::start(config, /*load=*/false);
    ASSERT_NE(server, nullptr);
    const std::vector<std::string> names = reflection_services(*server->channel());
    EXPECT_NE(std::find(names.begin(), names.end(), "tessera.v1.Generation"), names.end());
  }
  config.grpc_reflection = "false";
  {
    auto server = TestServer::start(config, /*load=*/false);
    ASSERT_NE(server, nullptr);
    EXPECT_TRUE(reflection_services(*server->channel()).empty());
    EXPECT_EQ(health_check(*server->channel(), ""), kNotServing) << "the server itself answers";
  }
}

TEST(SecurityE2E, ADrainedStreamEndsWithACancelledChunkThatSaysWhy) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.drain_timeout_seconds = 0.2;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  std::atomic<bool> started{false};
  StreamResult grpc_stream;
  std::thread grpc_client([&] {
    grpc::ClientContext ctx;
    auto reader = server->generation().GenerateStream(&ctx, greedy_request("A story:", 1500, true));
    v1::GenerateStreamChunk chunk;
    while (reader->Read(&chunk)) {
      started = true;
      grpc_stream.chunks.push_back(chunk);
    }
    grpc_stream.status = reader->Finish();
  });
  HttpReply sse;
  std::thread openai_client([&] {
    const std::string body =
        json{{"prompt", "A story:"}, {"max_tokens", 1500}, {"stream", true}, {"ignore_eos", true}}
            .dump();
    tessera::testing::HttpTestClient client(server->daemon().openai_port());
    client.send("POST /v1/completions HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
                "Content-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
    sse = client.read_reply(300s).value_or(HttpReply{});  // the head; the events follow
    sse.body = client.read_until("data: [DONE]", 300s).value_or("");
  });
  const v1::ServerStatus both = server->wait_status(
      [&](const v1::ServerStatus& s) { return started.load() && s.running_requests() == 2; }, 120s);
  // Drain and join whatever happened, so that a failure is reported rather than a crash.
  server->daemon().drain();
  grpc_client.join();
  openai_client.join();
  ASSERT_EQ(both.running_requests(), 2) << "SSE: " << sse.status << " " << sse.body.substr(0, 500);

  EXPECT_EQ(grpc_stream.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_NE(grpc_stream.status.error_message().find("draining"), std::string::npos)
      << grpc_stream.status.error_message();
  const v1::GenerateStreamChunk* last = grpc_stream.last();
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->finish_reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_NE(last->message().find("server draining"), std::string::npos) << last->message();
  EXPECT_EQ(last->message(), grpc_stream.status.error_message());
  EXPECT_GT(last->usage().completion_tokens(), 0);
  for (size_t i = 0; i + 1 < grpc_stream.chunks.size(); ++i) {
    EXPECT_EQ(grpc_stream.chunks[i].finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
    EXPECT_EQ(grpc_stream.chunks[i].message(), "");
  }

  // The SSE stream: a last chunk with finish_reason "cancelled", then the error, then [DONE].
  EXPECT_EQ(sse.status, 200);
  const size_t cancelled = sse.body.find("\"finish_reason\":\"cancelled\"");
  const size_t error = sse.body.find("server draining");
  const size_t done = sse.body.find("data: [DONE]");
  ASSERT_NE(cancelled, std::string::npos) << sse.body.substr(sse.body.size() > 600 ? sse.body.size() - 600 : 0);
  ASSERT_NE(error, std::string::npos);
  ASSERT_NE(done, std::string::npos);
  EXPECT_LT(cancelled, error);
  EXPECT_LT(error, done);
}

TEST(SecurityE2E, ATokenizeAnswerMayBeLargerThanTheRequestLimit) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.max_message_bytes = 1024 * 1024;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  // Valid text just under the request limit: its answer (an id and the bytes of each token) is
  // several times larger than the request.
  std::string text;
  while (text.size() + 8 < static_cast<size_t>(config.max_message_bytes) - 1024) text += "hello, ";
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 300s);
  v1::TokenizeRequest request;
  request.set_text(text);
  v1::TokenizeResponse response;
  const grpc::Status s = server->generation().Tokenize(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(response.ByteSizeLong(), static_cast<size_t>(config.max_message_bytes));
  EXPECT_EQ(response.token_ids_size(), response.tokens_size());
  std::string joined;
  for (const std::string& t : response.tokens()) joined += t;
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace tessera::e2e
