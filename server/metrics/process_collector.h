// The standard process metrics every Prometheus client exports, read from /proc/self when
// scraped: process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_open_fds, process_max_fds, process_start_time_seconds.
// Where /proc cannot be read, the metrics that need it are left out (never made up).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace tessera::server {

// From /proc/self/stat, given the clock tick rate, the page size and the boot time.
struct ProcStat {
  double cpu_seconds = 0;            // utime + stime
  double virtual_memory_bytes = 0;   // vsize
  double resident_memory_bytes = 0;  // rss pages * page size
  double start_time_seconds = 0;     // since the Unix epoch
};
absl::StatusOr<ProcStat> parse_proc_self_stat(std::string_view stat, double ticks_per_second,
                                              double page_size, double boot_time_seconds);
// The "btime" line of /proc/stat: boot time in seconds since the epoch.
absl::StatusOr<double> parse_boot_time(std::string_view proc_stat);
// The soft "Max open files" limit from /proc/self/limits ("unlimited" is +Inf).
absl::StatusOr<double> parse_max_open_files(std::string_view limits);

class ProcessCollector : public prometheus::Collectable {
 public:
  // Reads the boot time and the system's constants once.
  ProcessCollector();
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::optional<double> boot_time_seconds_;
  double ticks_per_second_ = 0;
  double page_size_ = 0;
};

}  // namespace tessera::server
