#include "server/metrics/process_collector.h"

#include <dirent.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::server {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

std::optional<std::string> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::string_view to_absl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Entries in /proc/self/fd, not counting the descriptor that lists them.
std::optional<double> count_open_fds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return std::nullopt;
  const int own = dirfd(dir);
  double n = 0;
  while (const dirent* entry = readdir(dir)) {
    int fd = -1;
    const char* name = entry->d_name;
    const char* end = name + std::char_traits<char>::length(name);
    if (std::from_chars(name, end, fd).ptr != end) continue;  // "." and ".."
    if (fd != own) ++n;
  }
  closedir(dir);
  return n;
}

MetricFamily single(const char* name, const char* help, MetricType type, double value) {
  MetricFamily family{name, help, type, {ClientMetric{}}};
  if (type == MetricType::Counter) {
    family.metric[0].counter.value = value;
  } else {
    family.metric[0].gauge.value = value;
  }
  return family;
}

}  // namespace

absl::StatusOr<ProcStat> parse_proc_self_stat(std::string_view stat, double ticks_per_second,
                                              double page_size, double boot_time_seconds) {
  // "pid (comm) state ppid ..." where comm may hold spaces and parentheses: fields start after
  // the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) {
    return absl::DataLossError("/proc/self/stat: no \")\" after the command name");
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(to_absl(stat.substr(paren + 1)), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field N is fields[N - 3].
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3, kStart = 22 - 3, kVsize = 23 - 3,
                   kRss = 24 - 3;
  if (fields.size() <= kRss) {
    return absl::DataLossError(
        absl::StrCat("/proc/self/stat: ", fields.size() + 2, " fields, expected at least 24"));
  }
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (!absl::SimpleAtod(fields[kUtime], &utime) || !absl::SimpleAtod(fields[kStime], &stime) ||
      !absl::SimpleAtod(fields[kStart], &start) || !absl::SimpleAtod(fields[kVsize], &vsize) ||
      !absl::SimpleAtod(fields[kRss], &rss)) {
    return absl::DataLossError("/proc/self/stat: a numeric field is not a number");
  }
  if (!(ticks_per_second > 0)) return absl::InvalidArgumentError("ticks_per_second must be > 0");
  ProcStat out;
  out.cpu_seconds = (utime + stime) / ticks_per_second;
  out.virtual_memory_bytes = vsize;
  out.resident_memory_bytes = rss * page_size;
  out.start_time_seconds = boot_time_seconds + start / ticks_per_second;
  return out;
}

absl::StatusOr<double> parse_boot_time(std::string_view proc_stat) {
  for (absl::string_view line : absl::StrSplit(to_absl(proc_stat), '\n')) {
    if (absl::ConsumePrefix(&line, "btime ")) {
      double t = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &t)) return t;
      return absl::DataLossError("/proc/stat: btime is not a number");
    }
  }
  return absl::NotFoundError("/proc/stat: no btime line");
}

absl::StatusOr<double> parse_max_open_files(std::string_view limits) {
  for (absl::string_view line : absl::StrSplit(to_absl(limits), '\n')) {
    if (!absl::ConsumePrefix(&line, "Max open files")) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.empty()) break;
    if (fields[0] == "unlimited") return std::numeric_limits<double>::infinity();
    double n = 0;
    if (absl::SimpleAtod(fields[0], &n)) return n;
    break;
  }
  return absl::NotFoundError("/proc/self/limits: no \"Max open files\" soft limit");
}

ProcessCollector::ProcessCollector() {
  ticks_per_second_ = static_cast<double>(sysconf(_SC_CLK_TCK));
  page_size_ = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (std::optional<std::string> stat = read_file("/proc/stat")) {
    if (absl::StatusOr<double> boot = parse_boot_time(*stat); boot.ok()) boot_time_seconds_ = *boot;
  }
}

std::vector<MetricFamily> ProcessCollector::Collect() const {
  std::vector<MetricFamily> out;
  if (std::optional<std::string> text = read_file("/proc/self/stat");
      text && boot_time_seconds_ && ticks_per_second_ > 0) {
    absl::StatusOr<ProcStat> stat =
        parse_proc_self_stat(*text, ticks_per_second_, page_size_, *boot_time_seconds_);
    if (stat.ok()) {
      out.push_back(single("process_cpu_seconds_total",
                           "Total user and system CPU time spent in seconds.", MetricType::Counter,
                           stat->cpu_seconds));
      out.push_back(single("process_resident_memory_bytes", "Resident memory size in bytes.",
                           MetricType::Gauge, stat->resident_memory_bytes));
      out.push_back(single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                           MetricType::Gauge, stat->virtual_memory_bytes));
      out.push_back(single("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, stat->start_time_seconds));
    }
  }
  if (std::optional<double> fds = count_open_fds()) {
    out.push_back(
        single("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, *fds));
  }
  if (std::optional<std::string> limits = read_file("/proc/self/limits")) {
    if (absl::StatusOr<double> max = parse_max_open_files(*limits); max.ok()) {
      out.push_back(single("process_max_fds", "Maximum number of open file descriptors.",
                           MetricType::Gauge, *max));
    }
  }
  return out;
}

}  // namespace tessera::server
