#include "tools/bench_report.h"

#include "gtest/gtest.h"

namespace tessera::cli {
namespace {

RequestRecord ok_record(double ttft, std::vector<double> itl, double latency, int32_t tokens,
                        int32_t prompt) {
  RequestRecord r;
  r.ttft_seconds = ttft;
  r.itl_seconds = std::move(itl);
  r.latency_seconds = latency;
  r.output_tokens = tokens;
  r.expected_output_tokens = tokens;
  r.prompt_tokens = prompt;
  r.finish_reason = v1::FINISH_REASON_LENGTH;
  return r;
}

RunResult sample_run() {
  RunResult run;
  run.duration_seconds = 2.0;
  run.records.push_back(ok_record(0.1, {0.2, 0.2}, 0.5, 3, 10));  // TPOT (0.5-0.1)/2 = 0.2
  run.records.push_back(ok_record(0.3, {0.1}, 0.5, 2, 30));       // TPOT 0.2
  run.records.push_back(ok_record(0.2, {}, 0.2, 1, 20));          // one token: no TPOT
  RequestRecord short_one = ok_record(0.1, {}, 0.1, 1, 5);
  short_one.expected_output_tokens = 4;
  run.records.push_back(short_one);
  for (int i = 0; i < 2; ++i) {
    RequestRecord failed;
    failed.code = grpc::StatusCode::RESOURCE_EXHAUSTED;
    failed.error = i == 0 ? "queue full (limit 8)" : "second";
    failed.output_tokens = 5;  // partial output of a failed request does not count
    run.records.push_back(failed);
  }
  RequestRecord deadline;
  deadline.code = grpc::StatusCode::DEADLINE_EXCEEDED;
  deadline.error = "Deadline Exceeded";
  run.records.push_back(deadline);
  return run;
}

TEST(BenchReport, CountsThroughputsAndLatencies) {
  const BenchReport r = make_report(sample_run());
  EXPECT_EQ(r.succeeded, 4u);
  EXPECT_EQ(r.failed, 3u);
  EXPECT_EQ(r.errors.at("RESOURCE_EXHAUSTED"), 2u);
  EXPECT_EQ(r.errors.at("DEADLINE_EXCEEDED"), 1u);
  EXPECT_EQ(r.error_examples.at("RESOURCE_EXHAUSTED"), "queue full (limit 8)");
  EXPECT_EQ(r.wrong_output_length, 1u);
  EXPECT_EQ(r.input_tokens, 65);
  EXPECT_EQ(r.output_tokens, 7);
  EXPECT_DOUBLE_EQ(r.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(r.input_token_throughput, 32.5);
  EXPECT_DOUBLE_EQ(r.output_token_throughput, 3.5);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 36.0);

  EXPECT_EQ(r.ttft.count, 4u);
  EXPECT_DOUBLE_EQ(r.ttft.mean, 0.175);
  EXPECT_DOUBLE_EQ(r.ttft.max, 0.3);
  EXPECT_EQ(r.itl.count, 3u);
  EXPECT_DOUBLE_EQ(r.itl.p50, 0.2);
  EXPECT_DOUBLE_EQ(r.itl.min, 0.1);
  EXPECT_EQ(r.tpot.count, 2u);
  EXPECT_DOUBLE_EQ(r.tpot.mean, 0.2);
  EXPECT_EQ(r.e2e_latency.count, 4u);
  EXPECT_DOUBLE_EQ(r.e2e_latency.max, 0.5);
}

TEST(BenchReport, TableAndJson) {
  BenchSetup setup;
  setup.server = "127.0.0.1:1";
  setup.mode = "closed loop, concurrency 2";
  setup.concurrency = 2;
  setup.request_rate = INFINITY;
  setup.prompt_len = "128";
  setup.output_len = "uniform:1:4";
  setup.prompt_kind = "token-ids";
  const BenchReport r = make_report(sample_run());

  const std::string table = render_report(setup, r);
  for (const char* needle :
       {"requests ok", "requests failed", "RESOURCE_EXHAUSTED x2", "DEADLINE_EXCEEDED x1",
        "wrong output length", "TTFT", "ITL", "TPOT", "end-to-end", "p50", "p90", "p99", "175.00",
        "queue full (limit 8)", "output throughput (tok/s)", "request throughput (req/s)"}) {
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  }

  const nlohmann::ordered_json j = report_json(setup, r);
  EXPECT_EQ(j["requests"]["succeeded"], 4);
  EXPECT_EQ(j["requests"]["failed"], 3);
  EXPECT_EQ(j["requests"]["errors"]["RESOURCE_EXHAUSTED"]["count"], 2);
  EXPECT_TRUE(j["setup"]["request_rate"].is_null());  // JSON has no infinity
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["mean"].get<double>(), 175.0);
  EXPECT_DOUBLE_EQ(j["throughput"]["output_tokens_per_s"].get<double>(), 3.5);
  for (const char* key : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_latency_ms"}) {
    for (const char* stat : {"mean", "p50", "p90", "p99", "max", "count"}) {
      EXPECT_TRUE(j[key].contains(stat)) << key << "." << stat;
    }
  }
}

TEST(BenchReport, WorkloadAndTheServersCounters) {
  BenchSetup setup;
  setup.mode = "closed loop, concurrency 2";
  setup.workload = "shared-prefix";
  setup.workload_params = {{"prefix_count", 4}, {"prefix_len", 256}};
  BenchReport r = make_report(sample_run());
  // Without --admin-server: no counters in the table, null in the JSON.
  EXPECT_EQ(render_report(setup, r).find("prefix cache hit rate"), std::string::npos);
  EXPECT_TRUE(report_json(setup, r)["server"].is_null());

  r.server = ServerDelta{.prefix_cache_queries = 1000, .prefix_cache_hits = 640, .preemptions = 3};
  const std::string table = render_report(setup, r);
  for (const char* needle : {"shared-prefix: prefix_count 4, prefix_len 256",
                             "64.0% (640 of 1000 prompt tokens)", "preemptions"}) {
    EXPECT_NE(table.find(needle), std::string::npos) << needle << "\n" << table;
  }
  const nlohmann::ordered_json j = report_json(setup, r);
  EXPECT_EQ(j["setup"]["workload"], "shared-prefix");
  EXPECT_EQ(j["setup"]["workload_params"]["prefix_len"], 256);
  EXPECT_DOUBLE_EQ(j["server"]["prefix_cache_hit_rate"].get<double>(), 0.64);
  EXPECT_DOUBLE_EQ(j["server"]["prefix_cache_query_tokens"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(j["server"]["preemptions"].get<double>(), 3);
  EXPECT_FALSE(j["server"].contains("step_ms"));  // no steps read: no per-step means

  // The steps' profile: per-step means in the table and the JSON.
  r.server->steps = 100;
  r.server->step_seqs = 800;
  r.server->step_tokens = 1600;
  r.server->step_seconds = 2.0;
  r.server->launch_seconds = 0.5;
  r.server->overlapped_seconds = 0.1;
  r.server->device_wait_seconds = 1.4;
  EXPECT_NE(render_report(setup, r).find("100 (8.0 seqs, 16.0 tokens, 20.00 ms each)"),
            std::string::npos);
  EXPECT_NE(render_report(setup, r).find("launch 5.000, overlapped 1.000, device wait 14.000"),
            std::string::npos);
  const nlohmann::ordered_json s = report_json(setup, r)["server"];
  EXPECT_DOUBLE_EQ(s["step_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(s["device_wait_ms"].get<double>(), 14.0);
  EXPECT_DOUBLE_EQ(s["overlapped_ms"].get<double>(), 1.0);

  // Nothing looked up: no rate rather than 0 / 0.
  r.server = ServerDelta{};
  EXPECT_NE(render_report(setup, r).find("- (no lookups)"), std::string::npos);
  EXPECT_TRUE(report_json(setup, r)["server"]["prefix_cache_hit_rate"].is_null());
}

TEST(BenchReport, EmptyRunIsAllZero) {
  const BenchReport r = make_report(RunResult{});
  EXPECT_EQ(r.succeeded, 0u);
  EXPECT_EQ(r.request_throughput, 0);
  EXPECT_EQ(r.ttft.count, 0u);
}

}  // namespace
}  // namespace tessera::cli
