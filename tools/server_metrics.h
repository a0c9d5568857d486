// tesserad's counters as its admin listener serves them (GET /metrics, Prometheus text), for
// `tessera bench serve --admin-server`: read before and after a run, their differences are what
// the run did to the server -- prefix-cache lookups and hits, preemptions, and the profile of its
// engine steps (where their time went).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::cli {

// Metric name -> value, summed over label sets, and each labelled sample under its own key as the
// text spells it (`name{label="value"}`); comments and malformed lines are skipped.
std::map<std::string, double> parse_prometheus_text(std::string_view text);

// GET http://ADDRESS/metrics (HOST:PORT, plain HTTP), parsed. UNAVAILABLE when the listener
// cannot be reached or answers other than 200.
absl::StatusOr<std::map<std::string, double>> scrape_metrics(const std::string& address);

// What the server did between two scrapes.
struct ServerDelta {
  double prefix_cache_queries = 0;  // prompt tokens looked up (tessera_prefix_cache_queries_total)
  double prefix_cache_hits = 0;     // of them, found cached (tessera_prefix_cache_hits_total)
  double preemptions = 0;           // tessera_num_preemptions_total
  // The engine's steps (tessera_step_*): how many, the sequences and tokens in them, their time,
  // and that time by phase (tessera_step_phase_seconds_total; schedule comes before a step's
  // own time, the other four add up to it).
  double steps = 0;
  double step_seqs = 0;
  double step_tokens = 0;
  double step_seconds = 0;
  double schedule_seconds = 0;
  double launch_seconds = 0;
  double overlapped_seconds = 0;
  double device_wait_seconds = 0;
  double update_seconds = 0;
  // hits / queries; nullopt when nothing was looked up.
  std::optional<double> prefix_cache_hit_rate() const;
};
ServerDelta server_delta(const std::map<std::string, double>& before,
                         const std::map<std::string, double>& after);

}  // namespace tessera::cli
