#include "server/metrics/process_collector.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera::server {
namespace {

TEST(ProcessCollectorTest, ParsesProcSelfStat) {
  // A command name with spaces and a ')' must not shift the fields.
  const std::string stat =
      "4242 (tess erad) (x)) S 1 4242 4242 0 -1 4194560 5000 0 0 0 "
      "250 150 0 0 20 0 9 0 12345 987654321 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 "
      "3 0 0 0 0 0\n";
  absl::StatusOr<ProcStat> s = parse_proc_self_stat(stat, 100, 4096, 1.7e9);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->cpu_seconds, 4.0);  // (250 + 150) / 100
  EXPECT_DOUBLE_EQ(s->virtual_memory_bytes, 987654321);
  EXPECT_DOUBLE_EQ(s->resident_memory_bytes, 2000.0 * 4096);
  EXPECT_DOUBLE_EQ(s->start_time_seconds, 1.7e9 + 123.45);
}

TEST(ProcessCollectorTest, RejectsTruncatedStat) {
  EXPECT_FALSE(parse_proc_self_stat("42 (x) S 1 2 3", 100, 4096, 0).ok());
  EXPECT_FALSE(parse_proc_self_stat("no parenthesis", 100, 4096, 0).ok());
}

TEST(ProcessCollectorTest, BootTimeAndFdLimit) {
  absl::StatusOr<double> boot =
      parse_boot_time("cpu  1 2 3\nintr 5\nbtime 1712345678\nprocesses 9\n");
  ASSERT_TRUE(boot.ok());
  EXPECT_EQ(*boot, 1712345678);
  EXPECT_FALSE(parse_boot_time("cpu 1 2 3\n").ok());

  const std::string limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max cpu time              unlimited            unlimited            seconds   \n"
      "Max open files            1024                 1048576              files     \n";
  absl::StatusOr<double> max = parse_max_open_files(limits);
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(*max, 1024);
  absl::StatusOr<double> unlimited =
      parse_max_open_files("Max open files            unlimited            unlimited    files\n");
  ASSERT_TRUE(unlimited.ok());
  EXPECT_TRUE(std::isinf(*unlimited));
}

TEST(ProcessCollectorTest, CollectsThisProcess) {
  const std::vector<prometheus::MetricFamily> families = ProcessCollector().Collect();
  std::vector<std::string> names;
  for (const prometheus::MetricFamily& f : families) names.push_back(f.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"process_cpu_seconds_total", "process_resident_memory_bytes",
                                      "process_virtual_memory_bytes", "process_start_time_seconds",
                                      "process_open_fds", "process_max_fds"}));
}

}  // namespace
}  // namespace tessera::server
