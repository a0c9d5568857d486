#include "server/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/metrics/metric_names.h"

namespace tessera::metrics {

absl::Status check_bucket_boundaries(const Histogram::BucketBoundaries& buckets) {
  for (size_t i = 0; i < buckets.size(); ++i) {
    const double b = buckets[i];
    if (std::isnan(b) || b == -std::numeric_limits<double>::infinity()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket boundary ", i, " is ", b));
    }
    if (std::isinf(b) && i + 1 != buckets.size()) {
      return absl::InvalidArgumentError("+Inf may only be the last bucket boundary");
    }
    if (i > 0 && !(buckets[i - 1] < b)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket boundaries must increase strictly: ", buckets[i - 1], " then ", b));
    }
  }
  return absl::OkStatus();
}

Histogram::Histogram(const BucketBoundaries& buckets) {
  if (absl::Status s = check_bucket_boundaries(buckets); !s.ok()) {
    fatal_metric_error(std::string(s.message()));
  }
  bucket_boundaries_ = buckets;
  if (!bucket_boundaries_.empty() && std::isinf(bucket_boundaries_.back())) {
    bucket_boundaries_.pop_back();
  }
  const size_t n = bucket_boundaries_.size() + 1;
  bucket_counts_ = std::make_unique<std::atomic<uint64_t>[]>(n);
  for (size_t i = 0; i < n; ++i) bucket_counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bucket_boundaries_.begin(), bucket_boundaries_.end(), value) -
      bucket_boundaries_.begin());
  bucket_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.add(value);
}

ClientMetric Histogram::Collect() const {
  ClientMetric metric;
  const size_t n = bucket_boundaries_.size() + 1;
  metric.histogram.bucket.reserve(n);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += bucket_counts_[i].load(std::memory_order_relaxed);
    metric.histogram.bucket.push_back(ClientMetric::Bucket{
        cumulative, i + 1 < n ? bucket_boundaries_[i] : std::numeric_limits<double>::infinity()});
  }
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = sum_.load();
  return metric;
}

}  // namespace tessera::metrics
