// TuningResults: lookup, answers, insert, merge, versions, concurrent readers and a writer.
#include "runtime/tuning/tuning_results.h"

#include <optional>
#include <thread>
#include <utility>
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
  r.insert(linear(1), {"a", 0.1});
  ASSERT_TRUE(r.find(linear(1)).has_value());
  EXPECT_EQ(r.find(linear(1))->solution, "a");
  EXPECT_FALSE(r.find(linear(2)).has_value());
  r.insert(linear(1), {"b", 0.2});
  EXPECT_EQ(r.find(linear(1))->solution, "b");
  EXPECT_EQ(r.answer(linear(1))->solution, "b");
  EXPECT_EQ(r.size(), 1u);
}

TEST(TuningResults, MergeAndSnapshot) {
  TunedEntries loaded;
  loaded[linear(1)] = {"a", 0.1};
  TuningResults r(loaded);
  TunedEntries more;
  more[linear(2)] = {"b", std::nullopt};
  more[linear(1)] = {"c", 0.3};
  r.merge(more);
  EXPECT_EQ(r.snapshot(), more);
}

// The version is for whoever keeps an answer (solution caches, recorded decode graphs): only a
// change to an answer handed out moves it, so tuning what nobody runs yet invalidates nothing.
TEST(TuningResults, OnlyAChangedAnswerMovesTheVersion) {
  TuningResults r;
  r.insert(linear(1), {"a", 0.1});
  r.insert(linear(2), {"b", 0.1});
  r.insert(linear(2), {"c", 0.1});
  EXPECT_EQ(r.version(), 0u);  // nobody has asked
  EXPECT_EQ(r.answer(linear(1))->solution, "a");
  EXPECT_FALSE(r.answer(linear(3)).has_value());  // a miss is an answer too (the default)
  EXPECT_FALSE(r.find(linear(4)).has_value());    // a look is not
  r.insert(linear(2), {"d", 0.1});
  r.insert(linear(4), {"e", 0.1});
  r.insert(linear(1), {"a", 0.05});  // a new time alone changes nothing that runs
  EXPECT_EQ(r.version(), 0u);
  r.insert(linear(1), {"f", 0.05});
  EXPECT_EQ(r.version(), 1u);
  r.insert(linear(3), {"g", 0.2});  // the miss now has a solution
  EXPECT_EQ(r.version(), 2u);

  TunedEntries more;
  more[linear(1)] = {"h", 0.1};
  more[linear(3)] = {"i", 0.1};
  more[linear(5)] = {"j", 0.1};
  r.merge(more);
  EXPECT_EQ(r.version(), 3u);  // once for the lot
  r.merge({{linear(6), {"k", 0.1}}});
  r.merge({});
  EXPECT_EQ(r.version(), 3u);
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
}

// A cache reads the version, then asks; whatever a writer does meanwhile, an answer that is no
// longer the entry's has moved the version past the one the cache keeps.
TEST(TuningResults, AnAnswerOvertakenByAWriterMovesTheVersion) {
  TuningResults r;
  std::vector<std::pair<uint64_t, int>> misses;  // (version read before asking, tokens)
  // One miss answered before the writer starts, so that the check below always has something
  // to check, whichever thread runs first.
  misses.emplace_back(r.version(), 64);
  ASSERT_FALSE(r.answer(linear(64)).has_value());
  std::thread reader([&] {
    for (int pass = 0; pass < 200; ++pass) {
      for (int t = 1; t <= 64; ++t) {
        const uint64_t v = r.version();
        if (!r.answer(linear(t)).has_value()) misses.emplace_back(v, t);
      }
    }
  });
  for (int t = 1; t <= 64; ++t) r.insert(linear(t), {"algo", 1.0});
  reader.join();
  for (const auto& [v, t] : misses) EXPECT_GT(r.version(), v) << "tokens " << t;
}

}  // namespace
}  // namespace tessera
