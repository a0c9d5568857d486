// The block pool with its prefix cache: lookups of full blocks along the hash chain, the
// evictable LRU and its order, refcounts of shared blocks, collisions, reset.
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kv_cache/block_allocator.h"
#include "runtime/kv_cache/block_hash.h"
#include "runtime/kv_cache/kv_cache.h"

namespace tessera {
namespace {

// One sequence's side of the cache, as the capacity scheduler keeps it.
struct Seq {
  explicit Seq(std::vector<int32_t> t, int32_t block_size) : tokens(std::move(t)) {
    extend_block_hashes(tokens, block_size, hashes);
  }
  std::vector<int32_t> tokens;
  std::vector<BlockHash> hashes;
  BlockTable table;
  CachedChain chain;
};

std::vector<int32_t> tokens_of(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(seed * 1000 + i);
  return t;
}

// Admits `seq` as the capacity scheduler does (its cached prefix shared, fresh blocks for the
// rest of its tokens); returns how many blocks were found cached.
int32_t admit(Seq& seq, BlockAllocator& a, int32_t block_size) {
  const PrefixMatch match = a.match_prefix(seq.tokens, seq.hashes,
                                           (static_cast<int32_t>(seq.tokens.size()) - 1) / block_size);
  seq.table.share(match.blocks, a);
  EXPECT_TRUE(seq.table.reserve(static_cast<int32_t>(seq.tokens.size()), block_size, a));
  seq.chain = match.chain;
  return static_cast<int32_t>(match.blocks.size());
}

// The K/V of every token of `seq` computed: its full blocks registered.
void compute(Seq& seq, BlockAllocator& a, int32_t block_size) {
  a.cache_blocks(seq.tokens, seq.hashes, seq.table.blocks(),
                 static_cast<int32_t>(seq.tokens.size()) / block_size, seq.chain);
}

TEST(PrefixCache, AFinishedSequencesFullBlocksServeTheNextOne) {
  BlockAllocator a(8, 4);
  Seq first(tokens_of(10, 1), 4);  // 2 full blocks and a partial one
  EXPECT_EQ(admit(first, a, 4), 0);
  compute(first, a, 4);
  EXPECT_EQ(a.num_cached(), 2);  // the partial block is not cached
  const std::vector<int32_t> first_blocks = first.table.blocks();
  first.table.release(a);
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_free(), 8);  // evictable blocks are allocatable
  EXPECT_EQ(a.num_evictable(), 2);

  Seq second(tokens_of(10, 1), 4);
  second.tokens.push_back(77);
  extend_block_hashes(second.tokens, 4, second.hashes);
  EXPECT_EQ(admit(second, a, 4), 2);
  EXPECT_EQ(second.table.blocks()[0], first_blocks[0]);
  EXPECT_EQ(second.table.blocks()[1], first_blocks[1]);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_EQ(a.num_used(), 3);
}

TEST(PrefixCache, AWholeCachedPromptStillLeavesItsLastBlockToCompute) {
  BlockAllocator a(8, 4);
  Seq first(tokens_of(8, 1), 4);
  admit(first, a, 4);
  compute(first, a, 4);
  first.table.release(a);
  // The same 8 tokens: both blocks are cached, but the last token must run for its logits.
  Seq again(tokens_of(8, 1), 4);
  EXPECT_EQ(admit(again, a, 4), 1);
}

TEST(PrefixCache, APromptDivergingMidBlockHitsOnlyTheFullBlocksBefore) {
  BlockAllocator a(16, 4);
  Seq first(tokens_of(16, 1), 4);
  admit(first, a, 4);
  compute(first, a, 4);
  first.table.release(a);
  std::vector<int32_t> diverging = tokens_of(16, 1);
  diverging[6] = 5;  // in block 1
  Seq second(diverging, 4);
  EXPECT_EQ(admit(second, a, 4), 1);
  compute(second, a, 4);
  // Its own blocks 1..3 are cached beside the first sequence's: 4 + 3.
  EXPECT_EQ(a.num_cached(), 7);
  second.table.release(a);
  Seq third(diverging, 4);
  third.tokens.push_back(1);
  extend_block_hashes(third.tokens, 4, third.hashes);
  EXPECT_EQ(admit(third, a, 4), 4);
}

TEST(PrefixCache, FreeBlocksGoFirstThenTheLeastRecentlyUsed) {
  BlockAllocator a(4, 2);
  Seq x(tokens_of(2, 1), 2), y(tokens_of(2, 2), 2), z(tokens_of(2, 3), 2);
  for (Seq* s : {&x, &y, &z}) {
    admit(*s, a, 2);
    compute(*s, a, 2);
  }
  const int32_t bx = x.table.blocks()[0], by = y.table.blocks()[0], bz = z.table.blocks()[0];
  for (Seq* s : {&x, &y, &z}) s->table.release(a);  // LRU: x, y, z
  // A hit makes y the most recently used: x, z, y.
  Seq y_again(tokens_of(2, 2), 2);
  y_again.tokens.push_back(9);
  extend_block_hashes(y_again.tokens, 2, y_again.hashes);
  const PrefixMatch hit = a.match_prefix(y_again.tokens, y_again.hashes, 1);
  ASSERT_EQ(hit.blocks, std::vector<int32_t>{by});
  EXPECT_EQ(hit.num_evictable, 1);
  a.retain(by);
  a.release(by);

  const int32_t never_used = *a.allocate();
  EXPECT_NE(never_used, bx);
  EXPECT_NE(never_used, by);
  EXPECT_NE(never_used, bz);
  EXPECT_EQ(a.num_cached(), 3);
  EXPECT_EQ(*a.allocate(), bx);
  EXPECT_EQ(a.num_cached(), 2);
  EXPECT_TRUE(a.match_prefix(x.tokens, x.hashes, 1).blocks.empty());  // evicted: gone
  EXPECT_EQ(*a.allocate(), bz);
  EXPECT_EQ(*a.allocate(), by);
  EXPECT_EQ(a.num_cached(), 0);
  EXPECT_FALSE(a.allocate().has_value());
}

TEST(PrefixCache, ASequencesTailIsEvictedBeforeItsHead) {
  BlockAllocator a(3, 2);
  Seq s(tokens_of(6, 1), 2);
  admit(s, a, 2);
  compute(s, a, 2);
  const std::vector<int32_t> blocks = s.table.blocks();
  s.table.release(a);  // last block first
  EXPECT_EQ(*a.allocate(), blocks[2]);
  // The head still serves a prompt that starts the same way.
  Seq t(tokens_of(6, 1), 2);
  EXPECT_EQ(a.match_prefix(t.tokens, t.hashes, 3).blocks,
            (std::vector<int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(*a.allocate(), blocks[1]);
  EXPECT_EQ(*a.allocate(), blocks[0]);
}

TEST(PrefixCache, SharedBlocksStayInUseUntilEverySequenceLetsGo) {
  BlockAllocator a(8, 4);
  Seq first(tokens_of(12, 1), 4);
  admit(first, a, 4);
  compute(first, a, 4);
  Seq second(tokens_of(12, 1), 4);
  second.tokens.push_back(3);
  extend_block_hashes(second.tokens, 4, second.hashes);
  EXPECT_EQ(admit(second, a, 4), 3);  // while the first still runs
  for (int i = 0; i < 3; ++i) EXPECT_EQ(a.refcount(first.table.blocks()[i]), 2);
  first.table.release(a);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_EQ(a.num_used(), 4);
  compute(second, a, 4);  // its fourth block is partial: nothing new
  EXPECT_EQ(a.num_cached(), 3);
  second.table.release(a);
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_evictable(), 3);
  EXPECT_EQ(a.num_cached(), a.num_evictable());
}

TEST(PrefixCache, TwoSequencesComputingTheSameBlocksCacheOneCopy) {
  BlockAllocator a(8, 4);
  Seq first(tokens_of(8, 1), 4), second(tokens_of(8, 1), 4);
  admit(first, a, 4);
  admit(second, a, 4);  // nothing cached yet: both compute
  compute(first, a, 4);
  compute(second, a, 4);
  EXPECT_EQ(a.num_cached(), 2);
  EXPECT_EQ(second.chain.num_blocks, 2);  // linked to the first's entries
  second.table.release(a);
  EXPECT_EQ(a.num_evictable(), 0);  // the second's copies are plain free blocks
  EXPECT_EQ(a.num_free(), 6);
  first.table.release(a);
  EXPECT_EQ(a.num_evictable(), 2);
}

TEST(PrefixCache, AHashCollisionNeverServesAnotherPrefix) {
  // Hashes made up so that they collide; the real ones never need to.
  BlockAllocator a(8, 2);
  Seq x({1, 2, 5, 6}, 2);  // blocks A, C
  x.hashes = {100, 200};
  Seq y({3, 4, 9, 9}, 2);  // blocks B, D
  y.hashes = {101, 201};
  for (Seq* s : {&x, &y}) {
    admit(*s, a, 2);
    compute(*s, a, 2);
  }
  // Other tokens under a cached hash: a miss.
  Seq other_tokens({1, 3, 5, 6, 0}, 2);
  other_tokens.hashes = {100, 200};
  EXPECT_TRUE(a.match_prefix(other_tokens.tokens, other_tokens.hashes, 2).blocks.empty());
  // B then C, where C's hash collides with x's C after A: the tokens of C are equal, but x's C
  // follows A, not B. Only B is served.
  Seq b_then_c({3, 4, 5, 6, 0}, 2);
  b_then_c.hashes = {101, 200};
  EXPECT_EQ(a.match_prefix(b_then_c.tokens, b_then_c.hashes, 2).blocks,
            std::vector<int32_t>{y.table.blocks()[0]});
  // Registering it replaces x's C under that hash (x keeps its block, no longer shared).
  admit(b_then_c, a, 2);
  compute(b_then_c, a, 2);
  EXPECT_EQ(b_then_c.chain.num_blocks, 2);
  Seq x_again({1, 2, 5, 6, 0}, 2);
  x_again.hashes = {100, 200};
  EXPECT_EQ(a.match_prefix(x_again.tokens, x_again.hashes, 2).blocks,
            std::vector<int32_t>{x.table.blocks()[0]});
  EXPECT_EQ(a.match_prefix(b_then_c.tokens, b_then_c.hashes, 2).blocks,
            (std::vector<int32_t>{y.table.blocks()[0], b_then_c.table.blocks()[1]}));
  for (Seq* s : {&x, &y, &b_then_c}) s->table.release(a);
  EXPECT_EQ(a.num_used(), 0);
  EXPECT_EQ(a.num_cached(), a.num_evictable());
}

TEST(PrefixCache, ABlockWhoseParentWasEvictedIsNeverServed) {
  BlockAllocator a(2, 2);
  Seq s(tokens_of(4, 1), 2);
  admit(s, a, 2);
  compute(s, a, 2);
  const std::vector<int32_t> blocks = s.table.blocks();
  s.table.release(a);  // LRU: tail, head
  a.retain(blocks[1]);  // a hit on the tail makes the head the least recently used
  a.release(blocks[1]);
  // The head is evicted and recomputed elsewhere: the old tail follows an entry that is gone.
  Seq head(tokens_of(2, 1), 2);
  const int32_t taken = *a.allocate();
  EXPECT_EQ(taken, blocks[0]);
  a.release(taken);
  admit(head, a, 2);
  compute(head, a, 2);
  Seq again(tokens_of(4, 1), 2);
  again.tokens.push_back(0);
  extend_block_hashes(again.tokens, 2, again.hashes);
  EXPECT_EQ(a.match_prefix(again.tokens, again.hashes, 2).blocks,
            std::vector<int32_t>{head.table.blocks()[0]});
  head.table.release(a);
}

TEST(PrefixCache, DroppingTheCacheFreesEvictableBlocksAndStopsSharingTheRest) {
  BlockAllocator a(8, 2);
  Seq done(tokens_of(4, 1), 2), running(tokens_of(4, 2), 2);
  for (Seq* s : {&done, &running}) {
    admit(*s, a, 2);
    compute(*s, a, 2);
  }
  done.table.release(a);
  EXPECT_EQ(a.num_cached(), 4);
  EXPECT_EQ(a.drop_cached(), 4);
  EXPECT_EQ(a.num_cached(), 0);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_EQ(a.num_used(), 2);
  EXPECT_TRUE(a.match_prefix(done.tokens, done.hashes, 2).blocks.empty());
  // The running sequence's later blocks are not cached either: nothing from before the reset.
  running.tokens.insert(running.tokens.end(), {7, 8});
  extend_block_hashes(running.tokens, 2, running.hashes);
  ASSERT_TRUE(running.table.reserve(6, 2, a));
  compute(running, a, 2);
  EXPECT_EQ(a.num_cached(), 0);
  running.table.release(a);
  EXPECT_EQ(a.num_free(), 8);
  EXPECT_EQ(a.num_evictable(), 0);
  EXPECT_EQ(a.drop_cached(), 0);
}

}  // namespace
}  // namespace tessera
