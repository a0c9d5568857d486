#include "tools/percentiles.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::cli {
namespace {

TEST(Percentile, InterpolatesBetweenRanksLikeNumpy) {
  const std::vector<double> v = {1, 2, 3, 4};  // numpy.percentile(v, p)
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
}

TEST(Percentile, EdgeCases) {
  EXPECT_EQ(percentile(std::vector<double>{}, 50), 0.0);
  EXPECT_EQ(percentile(std::vector<double>{7}, 0), 7.0);
  EXPECT_EQ(percentile(std::vector<double>{7}, 99), 7.0);
  // Out-of-range p is clamped rather than reading outside the data.
  EXPECT_EQ(percentile(std::vector<double>{1, 2}, 150), 2.0);
  EXPECT_EQ(percentile(std::vector<double>{1, 2}, -5), 1.0);
}

TEST(Summarize, OneToHundred) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  const Summary s = summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_DOUBLE_EQ(s.p90, 90.1);
  EXPECT_DOUBLE_EQ(s.p99, 99.01);
  EXPECT_NEAR(s.stddev, std::sqrt((100.0 * 100.0 - 1) / 12.0), 1e-9);
}

TEST(Summarize, EmptyIsAllZero) {
  const Summary s = summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.p99, 0);
}

}  // namespace
}  // namespace tessera::cli
