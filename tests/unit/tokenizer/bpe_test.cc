#include "runtime/tokenizer/bpe.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;

// Symbols are small ints standing for tokens: 1 = "a", 2 = "b", 3 = "c"; merge results from 10.
std::vector<int32_t> run(const Bpe& bpe, std::vector<int32_t> symbols) {
  Bpe::Scratch scratch;
  std::vector<int32_t> out;
  bpe.encode(symbols, &scratch, &out);
  return out;
}

TEST(Bpe, MergesByRankNotByPosition) {
  // "bc" (rank 0) wins over "ab" (rank 1) although "ab" comes first.
  const std::vector<Bpe::Merge> merges = {{2, 3, 10}, {1, 2, 11}};
  Bpe bpe(merges);
  EXPECT_THAT(run(bpe, {1, 2, 3}), ElementsAre(1, 10));
  EXPECT_THAT(run(bpe, {1, 2}), ElementsAre(11));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const std::vector<Bpe::Merge> merges = {{1, 1, 10}};
  Bpe bpe(merges);
  EXPECT_THAT(run(bpe, {1, 1, 1}), ElementsAre(10, 1));
  EXPECT_THAT(run(bpe, {1, 1, 1, 1}), ElementsAre(10, 10));
}

TEST(Bpe, MergesChainThroughNewTokens) {
  // a+a -> aa(10), aa+aa -> aaaa(11), aaaa+a -> aaaaa(12)
  const std::vector<Bpe::Merge> merges = {{1, 1, 10}, {10, 10, 11}, {11, 1, 12}};
  Bpe bpe(merges);
  EXPECT_THAT(run(bpe, {1, 1, 1, 1, 1}), ElementsAre(12));
  EXPECT_THAT(run(bpe, {1, 1, 1, 1, 1, 1}), ElementsAre(11, 10));
}

TEST(Bpe, StalePairsAreSkipped) {
  // "b c" (rank 0) consumes the 'b' that the queued "a b" (rank 1) pair wanted, so the later
  // candidate must be recognized as stale; "a bc" (rank 2) then applies.
  const std::vector<Bpe::Merge> merges = {{2, 3, 10}, {1, 2, 11}, {1, 10, 12}};
  Bpe bpe(merges);
  EXPECT_THAT(run(bpe, {1, 2, 3}), ElementsAre(12));
}

TEST(Bpe, NoMergesLeavesSymbols) {
  Bpe bpe;
  EXPECT_THAT(run(bpe, {3, 2, 1}), ElementsAre(3, 2, 1));
  EXPECT_THAT(run(bpe, {}), ElementsAre());
  EXPECT_THAT(run(bpe, {7}), ElementsAre(7));
}

TEST(Bpe, DuplicatePairTakesTheLaterRankLikeHf) {
  const std::vector<Bpe::Merge> merges = {{1, 2, 10}, {2, 3, 11}, {1, 2, 10}};
  Bpe bpe(merges);
  EXPECT_EQ(bpe.size(), 2u);
  // With "a b" demoted to rank 2, "b c" (rank 1) goes first.
  EXPECT_THAT(run(bpe, {1, 2, 3}), ElementsAre(1, 11));
  ASSERT_NE(bpe.find(1, 2), nullptr);
  EXPECT_EQ(bpe.find(1, 2)->result, 10);
  EXPECT_EQ(bpe.find(3, 1), nullptr);
}

TEST(Bpe, LongInputMergesCompletely) {
  // 2^16 'a's with a doubling merge chain collapse to a single token.
  std::vector<Bpe::Merge> merges;
  int32_t prev = 1;
  for (int level = 0; level < 16; ++level) {
    merges.push_back({prev, prev, 100 + level});
    prev = 100 + level;
  }
  Bpe bpe(merges);
  EXPECT_THAT(run(bpe, std::vector<int32_t>(1 << 16, 1)), ElementsAre(115));
}

}  // namespace
}  // namespace tessera
