#include "runtime/kv_cache/kv_cache.h"

#include <set>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"

namespace tessera {
namespace {

TEST(BlockAllocator, AllocatesEveryBlockOnceAndRecyclesAtZeroRefs) {
  BlockAllocator a(4, 8);
  std::set<int32_t> got;
  for (int i = 0; i < 4; ++i) got.insert(*a.allocate());
  EXPECT_EQ(got.size(), 4u);
  EXPECT_FALSE(a.allocate().has_value());
  a.retain(2);
  a.release(2);
  EXPECT_EQ(a.num_free(), 0);  // still referenced once
  a.release(2);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(*a.allocate(), 2);
}

TEST(BlockTable, ReserveIsAllOrNothing) {
  BlockAllocator a(3, 8);
  BlockTable t;
  EXPECT_TRUE(t.reserve(20, 8, a));  // 3 blocks
  EXPECT_EQ(t.num_blocks(), 3);
  BlockTable u;
  EXPECT_FALSE(u.reserve(1, 8, a));
  EXPECT_EQ(u.num_blocks(), 0);
  EXPECT_TRUE(t.reserve(24, 8, a));  // still fits in 3
  EXPECT_FALSE(t.reserve(25, 8, a));
  EXPECT_EQ(t.num_blocks(), 3);
  EXPECT_EQ(t.slot(9, 8), t.blocks()[1] * 8 + 1);
  t.release(a);
  EXPECT_EQ(a.num_free(), 3);
}

// Every KV size is made of one formula: the bytes of one token's K and V in one layer.
TEST(KvCacheShape, BlocksAreTokensTimesTheBytesOfOneTokenInOneLayer) {
  EXPECT_EQ(kv_bytes_per_token_per_layer(2, 8, DType::kF32), 2u * 2 * 8 * 4);  // K and V
  EXPECT_EQ(kv_bytes_per_token_per_layer(8, 128, DType::kBF16), 4096u);
  const KvCacheShape shape{3, 5, 16, 2, 8};
  EXPECT_EQ(shape.bytes_per_layer_block(DType::kF32),
            16 * kv_bytes_per_token_per_layer(2, 8, DType::kF32));
  EXPECT_EQ(shape.bytes_per_block(DType::kF32), 3 * shape.bytes_per_layer_block(DType::kF32));
}

TEST(KvCache, LayersDoNotOverlapAndRejectEmptyShapes) {
  CpuBackend backend(1);
  KvCacheShape shape{2, 3, 4, 2, 8};
  auto cache = KvCache::create(backend, shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const int64_t per = 3 * 4 * 2 * 8;
  const float* k0 = (*cache)->layer(0).k.as<float>();
  EXPECT_EQ((*cache)->layer(0).v.as<float>(), k0 + per);
  EXPECT_EQ((*cache)->layer(1).k.as<float>(), k0 + 2 * per);
  EXPECT_EQ((*cache)->layer(1).block_size(), 4);
  shape.num_blocks = 0;
  EXPECT_FALSE(KvCache::create(backend, shape).ok());
}

TEST(KvCache, EveryCacheHasItsOwnId) {
  // Graph recordings are keyed by the cache they write: a cache made where a freed one was must
  // not pass for it.
  CpuBackend backend(1);
  const KvCacheShape shape{1, 2, 4, 1, 8};
  auto first = KvCache::create(backend, shape);
  ASSERT_TRUE(first.ok());
  const uint64_t first_id = (*first)->id();
  EXPECT_NE(first_id, 0u);
  first->reset();
  auto second = KvCache::create(backend, shape);
  ASSERT_TRUE(second.ok());
  EXPECT_NE((*second)->id(), first_id);
  EXPECT_NE((*second)->id(), 0u);
}

}  // namespace
}  // namespace tessera
