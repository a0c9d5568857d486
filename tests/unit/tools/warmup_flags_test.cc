// tessera warmup's flags into an Admin.Warmup request, and the errors that name a bad flag.
#include "tools/warmup_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::cli {
namespace {

absl::StatusOr<WarmupFlags> parse(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  absl::StatusOr<Args> args = Args::parse(static_cast<int>(argv.size()), argv.data(),
                                          warmup_value_flags(), warmup_bool_flags());
  if (!args.ok()) return args.status();
  return read_warmup_flags(*args);
}

TEST(WarmupFlags, FillTheRequest) {
  absl::StatusOr<WarmupFlags> f =
      parse({"--buckets", "1, 2,4", "--prefill-pad", "32", "--max-prefill-tokens", "128",
             "--budget-s", "90", "--force", "--admin-token", "t0k"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(std::vector<int64_t>(f->request.decode_buckets().begin(),
                                 f->request.decode_buckets().end()),
            (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(f->request.prefill_pad(), 32);
  EXPECT_EQ(f->request.max_prefill_tokens(), 128);
  EXPECT_DOUBLE_EQ(f->request.time_budget_seconds(), 90);
  EXPECT_TRUE(f->request.force());
  EXPECT_EQ(f->admin_token, "t0k");
}

TEST(WarmupFlags, DefaultsLeaveTheServerToDecide) {
  absl::StatusOr<WarmupFlags> f = parse({});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->request.decode_buckets_size(), 0);
  EXPECT_EQ(f->request.prefill_pad(), 0);
  EXPECT_EQ(f->request.max_prefill_tokens(), 0);
  EXPECT_EQ(f->request.time_budget_seconds(), 0);
  EXPECT_FALSE(f->request.force());
}

TEST(WarmupFlags, ErrorsNameTheFlag) {
  for (const auto& [words, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--buckets", "4,2"}, "--buckets"},
           {{"--buckets", "1,x"}, "--buckets"},
           {{"--prefill-pad", "-1"}, "--prefill-pad"},
           {{"--max-prefill-tokens", "many"}, "--max-prefill-tokens"},
           {{"--budget-s", "-3"}, "--budget-s"}}) {
    absl::StatusOr<WarmupFlags> f = parse(words);
    ASSERT_FALSE(f.ok()) << words[0];
    EXPECT_NE(std::string(f.status().message()).find(flag), std::string::npos) << f.status();
  }
  EXPECT_FALSE(parse({"--bucket", "1"}).ok());
}

}  // namespace
}  // namespace tessera::cli
