// The partition arithmetic on its own: layers of one byte each (plus optional extras on the
// first and last segment), so that every expected split can be worked out by hand.
#include "runtime/placement/layer_partition.h"

#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

// `n` layers of one byte; `first_extra` bytes go with layer 0, `last_extra` with the last one.
struct Model {
  std::vector<uint64_t> layers;
  SegmentCost cost;
};
Model unit_model(int32_t n, uint64_t first_extra = 0, uint64_t last_extra = 0) {
  Model m;
  m.layers.assign(n, 1);
  m.cost = [=](int32_t begin, int32_t end) {
    uint64_t c = static_cast<uint64_t>(end - begin);
    if (begin == 0) c += first_extra;
    if (end == n) c += last_extra;
    return c;
  };
  return m;
}

LayerPartition balanced(const Model& m, const std::vector<uint64_t>& budgets) {
  return partition_balanced(m.layers, budgets, m.cost);
}
LayerPartition sequential(const Model& m, const std::vector<uint64_t>& budgets) {
  return partition_sequential(m.layers, budgets, m.cost);
}
LayerPartition low_0(const Model& m, const std::vector<uint64_t>& budgets) {
  return partition_balanced_low_0(m.layers, budgets, m.cost);
}

std::vector<std::pair<int32_t, int32_t>> ranges(const LayerPartition& p) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const LayerSegment& s : p.segments) out.emplace_back(s.begin, s.end);
  return out;
}

using ::testing::ElementsAre;
using ::testing::Pair;

TEST(PartitionBalanced, EqualDevicesSplitEvenly) {
  const LayerPartition p = balanced(unit_model(32), {100, 100});
  EXPECT_EQ(p.placed, 32);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 16), Pair(16, 32)));
}

TEST(PartitionBalanced, ExtrasOnTheEndsDoNotShiftAnEvenSplit) {
  // Embeddings-like bytes with layer 0 count against the budget, but the layers stay 16 / 16.
  EXPECT_THAT(ranges(balanced(unit_model(32, 2, 0), {100, 100})),
              ElementsAre(Pair(0, 16), Pair(16, 32)));
  // ... unless the budget says otherwise: 2 + 16 > 17.
  EXPECT_THAT(ranges(balanced(unit_model(32, 2, 0), {17, 100})),
              ElementsAre(Pair(0, 15), Pair(15, 32)));
}

TEST(PartitionBalanced, ExtraLayerGoesToADeviceWithoutExtras) {
  // 33 layers on 4 devices: one device takes 9; not the first or last, which carry extras.
  EXPECT_THAT(ranges(balanced(unit_model(33, 1, 1), {100, 100, 100, 100})),
              ElementsAre(Pair(0, 8), Pair(8, 16), Pair(16, 25), Pair(25, 33)));
}

TEST(PartitionBalanced, UnequalLayersBalanceBytes) {
  // Layers of 4, 1, 1, 1, 1: the 4-byte layer alone on device 0 gives 4 / 4.
  Model m = unit_model(5);
  m.layers = {4, 1, 1, 1, 1};
  m.cost = [&m](int32_t begin, int32_t end) {
    uint64_t c = 0;
    for (int32_t i = begin; i < end; ++i) c += m.layers[i];
    return c;
  };
  EXPECT_THAT(ranges(balanced(m, {100, 100})), ElementsAre(Pair(0, 1), Pair(1, 5)));
}

TEST(PartitionBalanced, UnevenCountPutsTheExtraLayerLate) {
  const LayerPartition p = balanced(unit_model(33), {100, 100, 100, 100});
  EXPECT_EQ(p.placed, 33);
  // Largest segment 9 (the least possible), the rest as even as can be.
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 8), Pair(8, 16), Pair(16, 24), Pair(24, 33)));
}

TEST(PartitionBalanced, SmallDeviceTakesWhatItCan) {
  const LayerPartition p = balanced(unit_model(32), {5, 100, 100});
  EXPECT_EQ(p.placed, 32);
  // Device 0 is capped at 5; the other 27 split 13 / 14 (largest 14, the least possible).
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 5), Pair(5, 18), Pair(18, 32)));
}

TEST(PartitionBalanced, FewerLayersThanDevices) {
  const LayerPartition p = balanced(unit_model(2), {100, 100, 100});
  EXPECT_EQ(p.placed, 2);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 0), Pair(0, 1), Pair(1, 2)));
}

TEST(PartitionBalanced, ZeroBudgetDeviceIsSkipped) {
  const LayerPartition p = balanced(unit_model(10), {100, 0, 100});
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 5), Pair(5, 5), Pair(5, 10)));
}

TEST(PartitionBalanced, DoesNotFitReportsTheFurthestFill) {
  const LayerPartition p = balanced(unit_model(32), {10, 10});
  EXPECT_EQ(p.placed, 20);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 10), Pair(10, 20)));
}

TEST(PartitionSequential, FillsInOrder) {
  EXPECT_THAT(ranges(sequential(unit_model(32), {100, 100})),
              ElementsAre(Pair(0, 32), Pair(32, 32)));
  EXPECT_THAT(ranges(sequential(unit_model(32), {10, 100})),
              ElementsAre(Pair(0, 10), Pair(10, 32)));
  // A 5-byte head goes with the last layer: device 0 takes 30 layers, device 1 2 + the head.
  EXPECT_THAT(ranges(sequential(unit_model(32, 0, 5), {30, 100})),
              ElementsAre(Pair(0, 30), Pair(30, 32)));
  // Everything but the head would fit on device 0: the last layer moves to device 1.
  EXPECT_THAT(ranges(sequential(unit_model(32, 0, 5), {33, 100})),
              ElementsAre(Pair(0, 31), Pair(31, 32)));
}

TEST(PartitionSequential, DoesNotFit) {
  const LayerPartition p = sequential(unit_model(32), {10, 10});
  EXPECT_EQ(p.placed, 20);
}

TEST(PartitionBalancedLow0, DeviceZeroGetsNothingWhenTheOthersHoldAll) {
  const LayerPartition p = low_0(unit_model(32), {100, 100, 100});
  EXPECT_EQ(p.placed, 32);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 0), Pair(0, 16), Pair(16, 32)));
}

TEST(PartitionBalancedLow0, DeviceZeroGetsTheOverflow) {
  const LayerPartition p = low_0(unit_model(32), {100, 12, 10});
  EXPECT_EQ(p.placed, 32);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 10), Pair(10, 22), Pair(22, 32)));
}

TEST(PartitionBalancedLow0, OneDeviceHoldsAll) {
  const LayerPartition p = low_0(unit_model(32), {100});
  EXPECT_EQ(p.placed, 32);
  EXPECT_THAT(ranges(p), ElementsAre(Pair(0, 32)));
}

TEST(PartitionBalancedLow0, DoesNotFit) {
  const LayerPartition p = low_0(unit_model(32), {10, 10, 10});
  EXPECT_EQ(p.placed, 30);
}

}  // namespace
}  // namespace tessera
