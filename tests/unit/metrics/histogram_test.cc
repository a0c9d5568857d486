#include "server/metrics/histogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera::metrics {
namespace {

std::vector<uint64_t> cumulative_counts(const Histogram& h) {
  std::vector<uint64_t> out;
  for (const ClientMetric::Bucket& b : h.Collect().histogram.bucket)
    out.push_back(b.cumulative_count);
  return out;
}

TEST(HistogramTest, ValueOnABoundaryCountsInThatBucket) {
  Histogram h({1.0, 2.0, 5.0});
  h.Observe(1.0);  // le="1"
  h.Observe(2.0);  // le="2"
  h.Observe(5.0);  // le="5"
  EXPECT_EQ(cumulative_counts(h), (std::vector<uint64_t>{1, 2, 3, 3}));
}

TEST(HistogramTest, ValuesFallIntoTheFirstBucketThatHoldsThem) {
  Histogram h({1.0, 2.0, 5.0});
  h.Observe(-3.0);                                     // below every bound: first bucket
  h.Observe(0.5);                                      // le="1"
  h.Observe(1.0001);                                   // le="2"
  h.Observe(4.9);                                      // le="5"
  h.Observe(5.1);                                      // +Inf only
  h.Observe(std::numeric_limits<double>::infinity());  // +Inf only
  EXPECT_EQ(cumulative_counts(h), (std::vector<uint64_t>{2, 3, 4, 6}));
  const ClientMetric m = h.Collect();
  EXPECT_EQ(m.histogram.sample_count, 6u);
  EXPECT_TRUE(std::isinf(m.histogram.bucket.back().upper_bound));
  EXPECT_EQ(m.histogram.bucket[0].upper_bound, 1.0);
  EXPECT_EQ(m.histogram.bucket[2].upper_bound, 5.0);
}

TEST(HistogramTest, SumAndCount) {
  Histogram h({0.1, 1.0});
  h.Observe(0.25);
  h.Observe(0.5);
  h.Observe(2.0);
  const ClientMetric m = h.Collect();
  EXPECT_EQ(m.histogram.sample_count, 3u);
  EXPECT_DOUBLE_EQ(m.histogram.sample_sum, 2.75);
  // The +Inf bucket always equals the count.
  EXPECT_EQ(m.histogram.bucket.back().cumulative_count, m.histogram.sample_count);
}

TEST(HistogramTest, NaNIsDropped) {
  Histogram h({1.0});
  h.Observe(std::nan(""));
  h.Observe(0.5);
  const ClientMetric m = h.Collect();
  EXPECT_EQ(m.histogram.sample_count, 1u);
  EXPECT_DOUBLE_EQ(m.histogram.sample_sum, 0.5);
}

TEST(HistogramTest, TrailingInfIsImplicit) {
  Histogram h({1.0, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.bucket_boundaries(), (Histogram::BucketBoundaries{1.0}));
  EXPECT_EQ(h.Collect().histogram.bucket.size(), 2u);
}

TEST(HistogramTest, NoBoundariesMeansOnlyInf) {
  Histogram h({});
  h.Observe(7);
  const ClientMetric m = h.Collect();
  ASSERT_EQ(m.histogram.bucket.size(), 1u);
  EXPECT_EQ(m.histogram.bucket[0].cumulative_count, 1u);
}

TEST(HistogramTest, BoundaryChecks) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(check_bucket_boundaries({0.1, 0.2, inf}).ok());
  EXPECT_FALSE(check_bucket_boundaries({1.0, 1.0}).ok());
  EXPECT_FALSE(check_bucket_boundaries({2.0, 1.0}).ok());
  EXPECT_FALSE(check_bucket_boundaries({inf, 1.0}).ok());
  EXPECT_FALSE(check_bucket_boundaries({-inf, 1.0}).ok());
  EXPECT_FALSE(check_bucket_boundaries({std::nan(""), 1.0}).ok());
}

TEST(HistogramDeathTest, UnsortedBoundariesAreFatal) {
  EXPECT_DEATH(Histogram({2.0, 1.0}), "bucket boundaries must increase strictly");
}

}  // namespace
}  // namespace tessera::metrics
