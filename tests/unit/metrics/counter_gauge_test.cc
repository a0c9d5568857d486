#include <gtest/gtest.h>

#include <cmath>

#include "server/metrics/counter.h"
#include "server/metrics/gauge.h"

namespace tessera::metrics {
namespace {

TEST(CounterTest, OnlyGoesUp) {
  Counter c;
  EXPECT_EQ(c.Value(), 0);
  c.Increment();
  c.Increment(2.5);
  c.Increment(-10);           // ignored
  c.Increment(std::nan(""));  // ignored
  EXPECT_DOUBLE_EQ(c.Value(), 3.5);
  EXPECT_DOUBLE_EQ(c.Collect().counter.value, 3.5);
}

TEST(GaugeTest, GoesBothWays) {
  Gauge g;
  g.Set(10);
  g.Increment();
  g.Increment(4);
  g.Decrement();
  g.Decrement(20);
  EXPECT_DOUBLE_EQ(g.Value(), -6);
  EXPECT_DOUBLE_EQ(g.Collect().gauge.value, -6);
  g.Set(0.25);
  EXPECT_DOUBLE_EQ(g.Value(), 0.25);
}

}  // namespace
}  // namespace tessera::metrics
