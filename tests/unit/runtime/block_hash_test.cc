// The prefix cache's hash chain: a block's hash stands for its tokens and every token before it;
// only full blocks are hashed.
#include "runtime/kv_cache/block_hash.h"

#include <vector>

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<int32_t> tokens_of(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 31 + seed * 7) % 1000);
  return t;
}

std::vector<BlockHash> chain_of(const std::vector<int32_t>& tokens, int32_t block_size) {
  std::vector<BlockHash> hashes;
  extend_block_hashes(tokens, block_size, hashes);
  return hashes;
}

TEST(BlockHash, TheSamePrefixGivesTheSameHashes) {
  const std::vector<int32_t> a = tokens_of(40, 1);
  std::vector<int32_t> b(a.begin(), a.begin() + 32);
  b.push_back(999);  // the same first two blocks, another partial third
  const std::vector<BlockHash> ha = chain_of(a, 16);
  const std::vector<BlockHash> hb = chain_of(b, 16);
  ASSERT_EQ(ha.size(), 2u);
  ASSERT_EQ(hb.size(), 2u);
  EXPECT_EQ(ha, hb);
  EXPECT_NE(ha[0], ha[1]);
  EXPECT_EQ(ha[0], hash_block(kRootBlockHash, std::span(a).first(16)));
  EXPECT_EQ(ha[1], hash_block(ha[0], std::span(a).subspan(16, 16)));
}

TEST(BlockHash, OneChangedTokenChangesItsBlockAndEveryLaterOne) {
  const std::vector<int32_t> a = tokens_of(64, 2);
  const std::vector<BlockHash> ha = chain_of(a, 16);
  for (int pos : {0, 15, 17, 40, 63}) {
    std::vector<int32_t> b = a;
    b[pos] += 1;
    const std::vector<BlockHash> hb = chain_of(b, 16);
    ASSERT_EQ(hb.size(), 4u);
    for (int block = 0; block < 4; ++block) {
      if (block < pos / 16) {
        EXPECT_EQ(hb[block], ha[block]) << "token " << pos << ", block " << block;
      } else {
        EXPECT_NE(hb[block], ha[block]) << "token " << pos << ", block " << block;
      }
    }
  }
}

TEST(BlockHash, TheSameBlockAfterAnotherParentHashesDifferently) {
  const std::vector<int32_t> block = tokens_of(16, 3);
  EXPECT_NE(hash_block(kRootBlockHash, block), hash_block(1, block));
  // Token order matters.
  std::vector<int32_t> swapped = block;
  std::swap(swapped[0], swapped[1]);
  EXPECT_NE(hash_block(kRootBlockHash, block), hash_block(kRootBlockHash, swapped));
}

TEST(BlockHash, APartialBlockIsNeverHashedAndExtendingAddsOnlyNewBlocks) {
  std::vector<int32_t> tokens = tokens_of(15, 4);
  std::vector<BlockHash> hashes;
  extend_block_hashes(tokens, 16, hashes);
  EXPECT_TRUE(hashes.empty());
  tokens.push_back(7);  // the block is full now
  extend_block_hashes(tokens, 16, hashes);
  ASSERT_EQ(hashes.size(), 1u);
  const BlockHash first = hashes[0];
  for (int i = 0; i < 20; ++i) tokens.push_back(i);  // 36 tokens: 2 full blocks
  extend_block_hashes(tokens, 16, hashes);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], first);
  EXPECT_EQ(hashes, chain_of(tokens, 16));
}

}  // namespace
}  // namespace tessera
