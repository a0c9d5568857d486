// Observations counted into buckets by upper bound (latencies, batch sizes). Observe() is
// lock-free: one relaxed atomic increment of the bucket the value falls in, plus a
// compare-exchange add to the sum. Buckets are kept per bucket and made cumulative when
// collected, so a scrape's +Inf bucket always equals its _count.
// Method names follow prometheus-cpp's prometheus::Histogram.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "server/metrics/atomic_double.h"
#include "server/metrics/client_metric.h"

namespace tessera::metrics {

class Histogram {
 public:
  static constexpr MetricType metric_type = MetricType::Histogram;
  // Upper bounds, strictly increasing and finite; the +Inf bucket is implicit (a trailing +Inf
  // is accepted and dropped).
  using BucketBoundaries = std::vector<double>;

  // Invalid boundaries are a programming error: fatal_metric_error (see check_bucket_boundaries).
  explicit Histogram(const BucketBoundaries& buckets);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose upper bound is >= value (Prometheus' "le"). NaN is
  // dropped (it would poison the sum for the life of the process).
  void Observe(double value);

  const BucketBoundaries& bucket_boundaries() const { return bucket_boundaries_; }
  ClientMetric Collect() const;

 private:
  BucketBoundaries bucket_boundaries_;
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;  // [bucket_boundaries_.size() + 1]
  AtomicDouble sum_;
};

// OK when `buckets` increase strictly and hold no NaN or -Inf; +Inf may only come last. An empty
// list is allowed (the histogram then has only the +Inf bucket).
absl::Status check_bucket_boundaries(const Histogram::BucketBoundaries& buckets);

}  // namespace tessera::metrics
