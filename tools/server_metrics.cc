#include "tools/server_metrics.h"

#include <algorithm>
#include <vector>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/tcp_connect.h"

namespace tessera::cli {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr int kTimeoutSeconds = 10;

double value_of(const std::map<std::string, double>& m, const std::string& name) {
  const auto it = m.find(name);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::map<std::string, double> parse_prometheus_text(std::string_view text) {
  std::map<std::string, double> metrics;
  // (This abseil's string_view is its own type, not std::string_view.)
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    // name{labels} value [timestamp] or name value [timestamp]; label values may hold spaces.
    const size_t brace = line.find('{');
    const size_t name_end = std::min(brace, line.find(' '));
    if (name_end == absl::string_view::npos) continue;
    const std::string name(line.substr(0, name_end));
    size_t value_start = name_end;
    if (brace == name_end) {
      const size_t close = line.rfind('}');
      if (close == absl::string_view::npos) continue;
      value_start = close + 1;
    }
    const std::vector<absl::string_view> rest =
        absl::StrSplit(line.substr(value_start), ' ', absl::SkipEmpty());
    double value;
    if (rest.empty() || !absl::SimpleAtod(rest[0], &value)) continue;
    metrics[name] += value;
    if (brace == name_end) metrics[std::string(line.substr(0, value_start))] = value;
  }
  return metrics;
}

absl::StatusOr<std::map<std::string, double>> scrape_metrics(const std::string& address) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::seconds(kTimeoutSeconds));
  if (absl::Status s = connect_host_port(address, stream); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("reading http://", address, "/metrics: ", s.message()));
  }
  beast::error_code ec;
  http::request<http::empty_body> request(http::verb::get, "/metrics", 11);
  request.set(http::field::host, address);
  http::write(stream, request, ec);
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) http::read(stream, buffer, response, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot read http://", address, "/metrics: ", ec.message()));
  }
  if (response.result_int() != 200) {
    return absl::UnavailableError(absl::StrCat("http://", address, "/metrics answered ",
                                               response.result_int()));
  }
  return parse_prometheus_text(response.body());
}

std::optional<double> ServerDelta::prefix_cache_hit_rate() const {
  if (prefix_cache_queries <= 0) return std::nullopt;
  return prefix_cache_hits / prefix_cache_queries;
}

ServerDelta server_delta(const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after) {
  auto delta = [&](const std::string& name) { return value_of(after, name) - value_of(before, name); };
  ServerDelta d;
  d.prefix_cache_queries = delta("tessera_prefix_cache_queries_total");
  d.prefix_cache_hits = delta("tessera_prefix_cache_hits_total");
  d.preemptions = delta("tessera_num_preemptions_total");
  d.steps = delta("tessera_step_duration_seconds_count");
  d.step_seqs = delta("tessera_step_num_seqs_sum");
  d.step_tokens = delta("tessera_step_num_tokens_sum");
  d.step_seconds = delta("tessera_step_duration_seconds_sum");
  auto phase = [&](const char* name) {
    return delta(absl::StrCat("tessera_step_phase_seconds_total{phase=\"", name, "\"}"));
  };
  d.schedule_seconds = phase("schedule");
  d.launch_seconds = phase("launch");
  d.overlapped_seconds = phase("overlapped");
  d.device_wait_seconds = phase("device_wait");
  d.update_seconds = phase("update");
  return d;
}

}  // namespace tessera::cli
