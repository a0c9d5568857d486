#include "tools/bench_report.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/server_connection.h"
#include "tools/text_table.h"

namespace tessera::cli {

namespace {

double per_second(double count, double seconds) {
  return seconds > 0 ? count / seconds : 0;
}

std::string ms(double seconds) {
  return absl::StrFormat("%.2f", seconds * 1e3);
}

nlohmann::ordered_json summary_ms_json(const Summary& s) {
  return {{"count", s.count},   {"mean", s.mean * 1e3}, {"stddev", s.stddev * 1e3},
          {"min", s.min * 1e3}, {"p50", s.p50 * 1e3},   {"p90", s.p90 * 1e3},
          {"p99", s.p99 * 1e3}, {"max", s.max * 1e3}};
}

// JSON has no infinity: a closed loop's rate is null.
nlohmann::ordered_json rate_json(double rate) {
  return std::isfinite(rate) ? nlohmann::ordered_json(rate) : nlohmann::ordered_json();
}

// The server's counters over the run; null when not read.
nlohmann::ordered_json server_json(const std::optional<ServerDelta>& server) {
  if (!server) return nullptr;
  const std::optional<double> rate = server->prefix_cache_hit_rate();
  nlohmann::ordered_json j = {
      {"prefix_cache_query_tokens", server->prefix_cache_queries},
      {"prefix_cache_hit_tokens", server->prefix_cache_hits},
      {"prefix_cache_hit_rate", rate ? nlohmann::ordered_json(*rate) : nlohmann::ordered_json()},
      {"preemptions", server->preemptions},
      {"steps", server->steps}};
  if (server->steps > 0) {  // per-step means
    const double n = server->steps;
    j["seqs_per_step"] = server->step_seqs / n;
    j["tokens_per_step"] = server->step_tokens / n;
    j["step_ms"] = 1e3 * server->step_seconds / n;
    j["schedule_ms"] = 1e3 * server->schedule_seconds / n;
    j["launch_ms"] = 1e3 * server->launch_seconds / n;
    j["overlapped_ms"] = 1e3 * server->overlapped_seconds / n;
    j["device_wait_ms"] = 1e3 * server->device_wait_seconds / n;
    j["update_ms"] = 1e3 * server->update_seconds / n;
  }
  return j;
}

}  // namespace

BenchReport make_report(const RunResult& run) {
  BenchReport r;
  r.stopped = run.stopped;
  r.duration_seconds = run.duration_seconds;
  std::vector<double> ttft, itl, tpot, e2e;
  for (const RequestRecord& rec : run.records) {
    if (rec.code != grpc::StatusCode::OK) {
      ++r.failed;
      const std::string code = status_code_name(rec.code);
      if (r.errors[code]++ == 0) r.error_examples[code] = rec.error;
      continue;
    }
    ++r.succeeded;
    if (rec.output_tokens != rec.expected_output_tokens) ++r.wrong_output_length;
    r.input_tokens += rec.prompt_tokens;
    r.output_tokens += rec.output_tokens;
    if (rec.ttft_seconds >= 0) ttft.push_back(rec.ttft_seconds);
    itl.insert(itl.end(), rec.itl_seconds.begin(), rec.itl_seconds.end());
    if (rec.output_tokens > 1 && rec.ttft_seconds >= 0) {
      tpot.push_back((rec.latency_seconds - rec.ttft_seconds) / (rec.output_tokens - 1));
    }
    e2e.push_back(rec.latency_seconds);
  }
  r.request_throughput = per_second(static_cast<double>(r.succeeded), r.duration_seconds);
  r.input_token_throughput = per_second(static_cast<double>(r.input_tokens), r.duration_seconds);
  r.output_token_throughput = per_second(static_cast<double>(r.output_tokens), r.duration_seconds);
  r.total_token_throughput = r.input_token_throughput + r.output_token_throughput;
  r.ttft = summarize(std::move(ttft));
  r.itl = summarize(std::move(itl));
  r.tpot = summarize(std::move(tpot));
  r.e2e_latency = summarize(std::move(e2e));
  return r;
}

std::string render_report(const BenchSetup& setup, const BenchReport& r) {
  std::string out = "============ tessera bench serve ============\n";
  TextTable facts({{"name"}, {"value"}});
  facts.add_row({"server", setup.server});
  if (!setup.model.empty()) facts.add_row({"model", setup.model});
  facts.add_row({"mode", setup.mode});
  std::string workload = setup.workload;
  for (const auto& [key, value] : setup.workload_params.items()) {
    absl::StrAppend(&workload, workload == setup.workload ? ": " : ", ", key, " ",
                    value.is_string() ? value.get<std::string>() : value.dump());
  }
  facts.add_row({"workload", workload});
  facts.add_row(
      {"prompt / output length", absl::StrCat(setup.prompt_len, " / ", setup.output_len)});
  facts.add_row({"prompts", setup.prompt_kind});
  facts.add_row({"requests ok", absl::StrCat(r.succeeded)});
  std::string failed = absl::StrCat(r.failed);
  for (const auto& [code, count] : r.errors) absl::StrAppend(&failed, "  ", code, " x", count);
  facts.add_row({"requests failed", failed});
  if (r.wrong_output_length > 0) {
    facts.add_row({"wrong output length", absl::StrCat(r.wrong_output_length)});
  }
  if (r.stopped) facts.add_row({"stopped early", "yes (interrupted)"});
  facts.add_row({"duration (s)", absl::StrFormat("%.2f", r.duration_seconds)});
  facts.add_row({"input tokens", absl::StrCat(r.input_tokens)});
  facts.add_row({"output tokens", absl::StrCat(r.output_tokens)});
  facts.add_row({"request throughput (req/s)", absl::StrFormat("%.2f", r.request_throughput)});
  facts.add_row({"input throughput (tok/s)", absl::StrFormat("%.1f", r.input_token_throughput)});
  facts.add_row({"output throughput (tok/s)", absl::StrFormat("%.1f", r.output_token_throughput)});
  facts.add_row({"total throughput (tok/s)", absl::StrFormat("%.1f", r.total_token_throughput)});
  if (r.server) {
    const std::optional<double> rate = r.server->prefix_cache_hit_rate();
    facts.add_row({"prefix cache hit rate",
                   rate ? absl::StrFormat("%.1f%% (%.0f of %.0f prompt tokens)", *rate * 100,
                                          r.server->prefix_cache_hits,
                                          r.server->prefix_cache_queries)
                        : std::string("- (no lookups)")});
    facts.add_row({"preemptions", absl::StrFormat("%.0f", r.server->preemptions)});
    if (const double n = r.server->steps; n > 0) {
      facts.add_row({"engine steps", absl::StrFormat("%.0f (%.1f seqs, %.1f tokens, %.2f ms each)", n,
                                                     r.server->step_seqs / n,
                                                     r.server->step_tokens / n,
                                                     1e3 * r.server->step_seconds / n)});
      facts.add_row({"step ms by phase",
                     absl::StrFormat("schedule %.3f, launch %.3f, overlapped %.3f, device wait "
                                     "%.3f, update %.3f",
                                     1e3 * r.server->schedule_seconds / n,
                                     1e3 * r.server->launch_seconds / n,
                                     1e3 * r.server->overlapped_seconds / n,
                                     1e3 * r.server->device_wait_seconds / n,
                                     1e3 * r.server->update_seconds / n)});
    }
  }
  out += facts.render(/*with_header=*/false);

  out += "\n";
  TextTable latency({{"latency (ms)"},
                     {"mean", true},
                     {"p50", true},
                     {"p90", true},
                     {"p99", true},
                     {"max", true},
                     {"n", true}});
  auto add = [&latency](const std::string& name, const Summary& s) {
    latency.add_row(
        {name, ms(s.mean), ms(s.p50), ms(s.p90), ms(s.p99), ms(s.max), absl::StrCat(s.count)});
  };
  add("TTFT", r.ttft);
  add("ITL", r.itl);
  add("TPOT", r.tpot);
  add("end-to-end", r.e2e_latency);
  out += latency.render();
  for (const auto& [code, message] : r.error_examples) {
    absl::StrAppend(&out, "\nfirst ", code, ": ", message);
  }
  if (!r.error_examples.empty()) out += "\n";
  return out;
}

nlohmann::ordered_json report_json(const BenchSetup& setup, const BenchReport& r) {
  nlohmann::ordered_json errors = nlohmann::ordered_json::object();
  for (const auto& [code, count] : r.errors) {
    errors[code] = {{"count", count}, {"first_message", r.error_examples.at(code)}};
  }
  return {
      {"setup",
       {{"server", setup.server},
        {"model", setup.model},
        {"mode", setup.mode},
        {"concurrency", setup.concurrency},
        {"request_rate", rate_json(setup.request_rate)},
        {"prompt_len", setup.prompt_len},
        {"output_len", setup.output_len},
        {"prompt_kind", setup.prompt_kind},
        {"seed", setup.seed},
        {"workload", setup.workload},
        {"workload_params", setup.workload_params}}},
      {"requests",
       {{"succeeded", r.succeeded},
        {"failed", r.failed},
        {"errors", errors},
        {"wrong_output_length", r.wrong_output_length},
        {"stopped_early", r.stopped}}},
      {"duration_s", r.duration_seconds},
      {"input_tokens", r.input_tokens},
      {"output_tokens", r.output_tokens},
      {"throughput",
       {{"requests_per_s", r.request_throughput},
        {"input_tokens_per_s", r.input_token_throughput},
        {"output_tokens_per_s", r.output_token_throughput},
        {"total_tokens_per_s", r.total_token_throughput}}},
      {"server", server_json(r.server)},
      {"ttft_ms", summary_ms_json(r.ttft)},
      {"itl_ms", summary_ms_json(r.itl)},
      {"tpot_ms", summary_ms_json(r.tpot)},
      {"e2e_latency_ms", summary_ms_json(r.e2e_latency)},
  };
}

}  // namespace tessera::cli
