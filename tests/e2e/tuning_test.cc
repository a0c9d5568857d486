// GEMM tuning through the daemon on the CPU backend: the admin HTTP routes, the Admin.Warmup
// stream, the admin token, the `tessera warmup` CLI, metrics, tune-on-miss while serving, and
// readiness held back by a warmup at start. Plans are tiny (one or two token counts) and
// candidates are timed for a millisecond, so that each warmup takes seconds.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "nlohmann/json.hpp"
#include "tests/e2e/test_server.h"
#include "tests/unit/metrics/http_test_client.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using tessera::testing::http_request;
using tessera::testing::HttpReply;

// One token count: qkv, o_proj, gate_up, down and lm_head at n = 1.
constexpr char kTinyPlan[] = R"({"decode_buckets": [1], "prefill_pad": 1, "max_prefill_tokens": 1})";
constexpr int kTinyPlanGemms = 5;

std::string temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("tuning_e2e_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

server::DaemonConfig tuning_config(const std::string& dir, const std::string& mode) {
  server::DaemonConfig c = test_config();
  c.tuning_mode = mode;
  c.tuning_file = dir + "/results.csv";
  c.tuning_max_duration_ms = 1;
  c.tuning_max_iterations = 2;
  c.tuning_rotating_buffer_mb = 0;
  return c;
}

HttpReply admin(int port, const std::string& method, const std::string& path,
                const std::string& body = "", const std::string& token = "") {
  const std::string headers = token.empty() ? "" : "Authorization: Bearer " + token + "\r\n";
  return http_request(port, method, path, headers, body).value_or(HttpReply{});
}

// Polls GET /v1/tuning until the last warmup has ended; returns the last document.
json wait_for_warmup(int port, const std::string& token = "") {
  json doc;
  const auto until = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < until) {
    const HttpReply r = admin(port, "GET", "/v1/tuning", "", token);
    EXPECT_EQ(r.status, 200) << r.body;
    doc = json::parse(r.body);
    if (!doc["warmup"].is_null() && doc["warmup"]["state"] != "running") break;
    std::this_thread::sleep_for(50ms);
  }
  return doc;
}

TEST(TuningE2E, HttpWarmupTunesThePlanAndGetShowsIt) {
  TESSERA_SKIP_WITHOUT_MODEL();
  const std::string dir = temp_dir("http");
  auto server = TestServer::start(tuning_config(dir, "tune"));
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();

  const HttpReply bad = admin(port, "POST", "/v1/tuning/warmup", R"({"decode_buckets": [2, 1]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("decode_buckets"), std::string::npos) << bad.body;
  const HttpReply unknown = admin(port, "POST", "/v1/tuning/warmup", R"({"buckets": [1]})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("buckets"), std::string::npos) << unknown.body;

  const HttpReply started = admin(port, "POST", "/v1/tuning/warmup", kTinyPlan);
  ASSERT_EQ(started.status, 202) << started.body;
  EXPECT_EQ(json::parse(started.body)["total"], kTinyPlanGemms);
  json doc = wait_for_warmup(port);
  EXPECT_EQ(doc["mode"], "tune");
  EXPECT_EQ(doc["warmup"]["state"], "done") << doc.dump(2);
  EXPECT_EQ(doc["warmup"]["done"], kTinyPlanGemms);
  ASSERT_EQ(doc["warmup"]["table"].size(), static_cast<size_t>(kTinyPlanGemms));
  bool lm_head = false;
  for (const json& g : doc["warmup"]["table"]) {
    EXPECT_EQ(g["outcome"], "tuned") << g.dump();
    EXPECT_GT(g["avg_ms"].get<double>(), 0) << g.dump();
    EXPECT_GT(g["gain"].get<double>(), 0) << g.dump();
    lm_head = lm_head || g["used_by"] == "lm_head";
  }
  EXPECT_TRUE(lm_head);
  ASSERT_EQ(doc["devices"].size(), 1u);
  EXPECT_GE(doc["devices"][0]["results"].size(), static_cast<size_t>(kTinyPlanGemms));
  // No admin token configured: nobody sees the host details (the CPU model, the file's path).
  EXPECT_FALSE(doc["devices"][0].contains("validators")) << doc["devices"][0].dump(2);
  EXPECT_FALSE(doc["devices"][0].contains("results_file"));
  EXPECT_FALSE(doc["devices"][0].contains("load_warnings"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/results0.csv"));

  const HttpReply metrics = admin(port, "GET", "/metrics");
  for (const char* name : {"tessera_gemm_tuned_shapes_total 5", "tessera_gemm_tuning_seconds_total",
                           "tessera_gemm_tuned_hits_total", "tessera_gemm_tuned_misses_total",
                           "tessera_gemm_tuning_gain_ratio{device=\"0\""}) {
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name;
  }

  // Serving still works, with the tuned solutions.
  ASSERT_TRUE(generate(server->generation(), greedy_request("Hello", 4)).status.ok());

  // A second warmup while one runs is refused.
  const HttpReply long_one = admin(port, "POST", "/v1/tuning/warmup",
                                   R"({"decode_buckets": [1, 2, 4, 8], "prefill_pad": 8,
                                       "max_prefill_tokens": 64, "force": true,
                                       "time_budget_seconds": 1})");
  ASSERT_EQ(long_one.status, 202) << long_one.body;
  const HttpReply conflict = admin(port, "POST", "/v1/tuning/warmup", kTinyPlan);
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_NE(conflict.body.find("already running"), std::string::npos) << conflict.body;
  json after = wait_for_warmup(port);
  EXPECT_EQ(after["warmup"]["state"], "done");
  EXPECT_NE(after["warmup"]["summary"].get<std::string>().find("time budget"), std::string::npos)
      << after["warmup"]["summary"];
}

TEST(TuningE2E, GrpcWarmupStreamsEachGemmThenTheTable) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto server = TestServer::start(tuning_config(temp_dir("grpc"), "tune"));
  ASSERT_NE(server, nullptr);
  v1::WarmupRequest request;
  request.add_decode_buckets(1);
  request.set_prefill_pad(1);
  request.set_max_prefill_tokens(1);
  grpc::ClientContext ctx;
  auto reader = server->admin().Warmup(&ctx, request);
  std::vector<v1::WarmupProgress> messages;
  v1::WarmupProgress m;
  while (reader->Read(&m)) messages.push_back(m);
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(messages.size(), static_cast<size_t>(kTinyPlanGemms + 1));
  for (int i = 0; i < kTinyPlanGemms; ++i) {
    EXPECT_EQ(messages[i].state(), "running");
    EXPECT_EQ(messages[i].done(), i + 1);
    EXPECT_EQ(messages[i].total(), kTinyPlanGemms);
    EXPECT_EQ(messages[i].current().outcome(), "tuned");
    EXPECT_FALSE(messages[i].current().solution().empty());
  }
  const v1::WarmupProgress& last = messages.back();
  EXPECT_EQ(last.state(), "done");
  EXPECT_EQ(last.table_size(), kTinyPlanGemms);
  EXPECT_NE(last.summary().find("5 tuned"), std::string::npos) << last.summary();

  // Not forced: a second warmup finds every GEMM tuned.
  grpc::ClientContext again_ctx;
  auto again = server->admin().Warmup(&again_ctx, request);
  v1::WarmupProgress final;
  while (again->Read(&m)) final = m;
  ASSERT_TRUE(again->Finish().ok());
  for (const v1::TunedGemm& g : final.table()) EXPECT_EQ(g.outcome(), "cached");

  v1::WarmupRequest bad = request;
  bad.set_max_prefill_tokens(1 << 30);
  grpc::ClientContext bad_ctx;
  auto refused = server->admin().Warmup(&bad_ctx, bad);
  while (refused->Read(&m)) {
  }
  const grpc::Status invalid = refused->Finish();
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(invalid.error_message().find("max_prefill_tokens"), std::string::npos)
      << invalid.error_message();
}

TEST(TuningE2E, AdminTokenGuardsTuningAndTheCliWarmsUp) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = tuning_config(temp_dir("token"), "tune");
  config.admin_token = "s3cret";
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();
  EXPECT_EQ(admin(port, "POST", "/v1/tuning/warmup", kTinyPlan).status, 401);
  // GET answers everyone; only the admin token shows the host details.
  const HttpReply anonymous = admin(port, "GET", "/v1/tuning");
  ASSERT_EQ(anonymous.status, 200) << anonymous.body;
  const json public_doc = json::parse(anonymous.body);
  EXPECT_FALSE(public_doc["devices"][0].contains("validators")) << anonymous.body;
  EXPECT_FALSE(public_doc["devices"][0].contains("results_file")) << anonymous.body;
  const HttpReply wrong = admin(port, "GET", "/v1/tuning", "", "s3cre7");
  ASSERT_EQ(wrong.status, 200);
  EXPECT_FALSE(json::parse(wrong.body)["devices"][0].contains("validators")) << wrong.body;
  const HttpReply full = admin(port, "GET", "/v1/tuning", "", "s3cret");
  ASSERT_EQ(full.status, 200);
  const json full_doc = json::parse(full.body);
  EXPECT_TRUE(full_doc["devices"][0]["validators"].contains("CPU_MODEL")) << full.body;
  EXPECT_NE(full_doc["devices"][0]["results_file"].get<std::string>().find("results"),
            std::string::npos) << full.body;
  EXPECT_EQ(admin(port, "GET", "/metrics").status, 200);  // scrapes stay open

  grpc::ClientContext ctx;
  auto reader = server->admin().Warmup(&ctx, v1::WarmupRequest());
  v1::WarmupProgress m;
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  const std::string cli = TESSERA_CLI;
  if (!std::filesystem::exists(cli)) GTEST_SKIP() << "tessera CLI not built: " << cli;
  const std::string command = cli + " warmup --server " + server->address() +
                              " --buckets 1 --prefill-pad 1 --max-prefill-tokens 1"
                              " --admin-token s3cret 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << command << "\n" << out;
  EXPECT_NE(out.find("USED BY"), std::string::npos) << out;
  EXPECT_NE(out.find("lm_head"), std::string::npos) << out;
  EXPECT_NE(out.find("GemmTunableOp_float_TN"), std::string::npos) << out;

  const std::string no_token = cli + " warmup --server " + server->address() + " 2>&1";
  pipe = popen(no_token.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  out.clear();
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  EXPECT_NE(pclose(pipe), 0);
  EXPECT_NE(out.find("UNAUTHENTICATED"), std::string::npos) << out;
}

TEST(TuningE2E, TuneModeTunesOnFirstUseWhileOffModeRefusesWarmup) {
  TESSERA_SKIP_WITHOUT_MODEL();
  {
    auto server = TestServer::start(tuning_config(temp_dir("miss"), "tune"));
    ASSERT_NE(server, nullptr);
    ASSERT_TRUE(generate(server->generation(), greedy_request("Hi", 2)).status.ok());
    json doc = json::parse(admin(server->daemon().admin_port(), "GET", "/v1/tuning").body);
    EXPECT_GT(doc["counters"]["misses"].get<int64_t>(), 0) << doc.dump(2);
    EXPECT_GT(doc["counters"]["shapes_tuned"].get<int64_t>(), 0) << doc.dump(2);
    EXPECT_FALSE(doc["devices"][0]["results"].empty());
    EXPECT_TRUE(doc["warmup"].is_null());
  }
  auto off = TestServer::start(tuning_config(temp_dir("off"), "off"));
  ASSERT_NE(off, nullptr);
  const HttpReply refused = admin(off->daemon().admin_port(), "POST", "/v1/tuning/warmup", kTinyPlan);
  EXPECT_EQ(refused.status, 409);
  EXPECT_NE(refused.body.find("mode is off"), std::string::npos) << refused.body;
}

TEST(TuningE2E, WarmupAtStartHoldsReadinessAndHealthUntilDone) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = tuning_config(temp_dir("start"), "warmup");
  config.max_batch_tokens = 4;
  config.max_num_seqs = 2;
  config.tuning_decode_buckets = {1, 2};
  config.tuning_prefill_pad = 2;
  auto server = TestServer::start(config, /*load=*/false);
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();
  ASSERT_TRUE(server->daemon().load_model().ok());

  const HttpReply warming = admin(port, "GET", "/readyz");
  EXPECT_EQ(warming.status, 503);
  EXPECT_NE(warming.body.find("warming up: "), std::string::npos) << warming.body;
  EXPECT_NE(warming.body.find("/14 GEMMs"), std::string::npos) << warming.body;
  EXPECT_EQ(health_check(*server->channel(), ""), kNotServing);
  EXPECT_EQ(server->status().state(), "warming_up");
  const UnaryResult early = generate(server->generation(), greedy_request("Hi", 2));
  EXPECT_EQ(early.status.error_code(), grpc::StatusCode::UNAVAILABLE);

  json doc = wait_for_warmup(port);
  EXPECT_EQ(doc["warmup"]["state"], "done");
  EXPECT_EQ(doc["warmup"]["total"], 14);
  HttpReply ready;
  for (int i = 0; i < 100 && ready.status != 200; ++i) {
    ready = admin(port, "GET", "/readyz");
    if (ready.status != 200) std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(health_check(*server->channel(), ""), kServing);
  EXPECT_TRUE(generate(server->generation(), greedy_request("Hi", 2)).status.ok());
}

}  // namespace
}  // namespace tessera::e2e
