// TuningResults: lookup, insert, merge, versions, concurrent readers and a writer.
#include "runtime/tuning/tuning_results.h"

#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera {
namespace {

GemmSignature linear(int64_t tokens) {
  return GemmSignature::for_linear(tokens, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16);
}

TEST(TuningResults, FindInsertReplace) {
  TuningResults r;
  EXPECT_FALSE(r.find(linear(1)).has_value());
  EXPECT_EQ(r.version(), 0u);
  r.insert(linear(1), {"a", 0.1});
  ASSERT_TRUE(r.find(linear(1)).has_value());
  EXPECT_EQ(r.find(linear(1))->solution, "a");
  EXPECT_FALSE(r.find(linear(2)).has_value());
  r.insert(linear(1), {"b", 0.2});
  EXPECT_EQ(r.find(linear(1))->solution, "b");
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.version(), 2u);
}

TEST(TuningResults, MergeAndSnapshot) {
  TunedEntries loaded;
  loaded[linear(1)] = {"a", 0.1};
  TuningResults r(loaded);
  EXPECT_EQ(r.version(), 0u);
  r.merge({});
  EXPECT_EQ(r.version(), 0u);  // nothing changed
  TunedEntries more;
  more[linear(2)] = {"b", std::nullopt};
  more[linear(1)] = {"c", 0.3};
  r.merge(more);
  uint64_t v = 0;
  const TunedEntries snap = r.snapshot(&v);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(snap, more);
}

TEST(TuningResults, ConcurrentReadersAndWriter) {
  TuningResults r;
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      for (int pass = 0; pass < 200; ++pass) {
        for (int t = 1; t <= 64; ++t) {
          if (std::optional<TunedSolution> s = r.find(linear(t))) {
            EXPECT_EQ(s->solution, "algo");
          }
        }
        std::this_thread::yield();
      }
    });
  }
  for (int t = 1; t <= 64; ++t) r.insert(linear(t), {"algo", 1.0});
  for (std::thread& th : readers) th.join();
  EXPECT_EQ(r.size(), 64u);
  EXPECT_EQ(r.version(), 64u);
}

}  // namespace
}  // namespace tessera
