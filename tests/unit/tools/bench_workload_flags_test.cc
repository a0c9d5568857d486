// bench serve's workload flags: defaults, each workload's own flags, and the combinations that
// make no sense refused with the flag named.
#include "tools/bench_workload_flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/bench_options.h"
#include "tools/server_connection.h"

namespace tessera::cli {
namespace {

absl::StatusOr<WorkloadFlags> workload_flags(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  auto args = Args::parse(
      static_cast<int>(argv.size()), argv.data(),
      merge_flags({bench_serve_value_flags(), bench_workload_value_flags(), connection_value_flags()}),
      connection_bool_flags());
  if (!args.ok()) return args.status();
  return read_bench_workload_flags(*args);
}

std::string error_of(std::vector<std::string> words) {
  auto f = workload_flags(std::move(words));
  return f.ok() ? "" : std::string(f.status().message());
}

TEST(BenchWorkloadFlags, DefaultsAndEachWorkloadsFlags) {
  auto plain = workload_flags({});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->kind, WorkloadKind::kRandom);
  EXPECT_TRUE(plain->admin_address.empty());

  auto shared = workload_flags({"--workload", "shared-prefix", "--prefix-count", "3",
                                "--prefix-len", "100", "--prompt-len", "20"});
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_EQ(shared->kind, WorkloadKind::kSharedPrefix);
  EXPECT_EQ(shared->prefix_count, 3);
  EXPECT_EQ(shared->prefix_len, 100);

  auto turns = workload_flags({"--workload", "multi-turn", "--conversations", "5", "--turns",
                               "6", "--admin-server", "127.0.0.1:8002", "--duration", "10"});
  ASSERT_TRUE(turns.ok()) << turns.status();
  EXPECT_EQ(turns->kind, WorkloadKind::kMultiTurn);
  EXPECT_EQ(turns->conversations, 5);
  EXPECT_EQ(turns->turns, 6);
  EXPECT_EQ(turns->admin_address, "127.0.0.1:8002");
  EXPECT_TRUE(workload_flags({"--workload", "multi-turn", "--api", "openai", "--prompt-kind",
                              "words"})
                  .ok());

  auto sharegpt = workload_flags({"--workload", "sharegpt", "--concurrency", "4"});
  ASSERT_TRUE(sharegpt.ok()) << sharegpt.status();
  EXPECT_EQ(sharegpt->kind, WorkloadKind::kShareGpt);
}

TEST(BenchWorkloadFlags, FlagsOutsideTheirWorkloadAreRefusedByName) {
  EXPECT_NE(error_of({"--workload", "chat"}).find("--workload=chat"), std::string::npos);
  EXPECT_NE(error_of({"--prefix-len", "10"}).find("--prefix-len needs --workload shared-prefix"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "sharegpt", "--turns", "2"})
                .find("--turns needs --workload multi-turn"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "sharegpt", "--prompt-len", "64"}).find("--prompt-len"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "sharegpt", "--output-len", "64"}).find("--output-len"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "multi-turn", "--num-requests", "10"}).find("--num-requests"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "multi-turn", "--api", "openai"}).find("--prompt-kind words"),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "shared-prefix", "--prefix-count", "0"})
                .find("--prefix-count must be in [1, "),
            std::string::npos);
  EXPECT_NE(error_of({"--workload", "multi-turn", "--turns", "x"}).find("turns"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
