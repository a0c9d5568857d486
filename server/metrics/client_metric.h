// A snapshot of metric values, as collected for exposition: prometheus-cpp's ClientMetric and
// MetricFamily (same field names, so that a later switch to prometheus-cpp changes little).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::metrics {

enum class MetricType { Counter, Gauge, Histogram, Untyped };

// "counter", "gauge", "histogram", "untyped": the word on a # TYPE line.
const char* metric_type_name(MetricType type);

struct ClientMetric {
  struct Label {
    std::string name;
    std::string value;
    bool operator==(const Label&) const = default;
  };
  std::vector<Label> label;  // sorted by name

  struct Counter {
    double value = 0;
  };
  Counter counter;

  struct Gauge {
    double value = 0;
  };
  Gauge gauge;

  struct Bucket {
    uint64_t cumulative_count = 0;
    double upper_bound = 0;  // +Inf for the last bucket
  };
  struct Histogram {
    uint64_t sample_count = 0;
    double sample_sum = 0;
    std::vector<Bucket> bucket;  // increasing upper bounds, ending with +Inf
  };
  Histogram histogram;

  struct Untyped {
    double value = 0;
  };
  Untyped untyped;
};

struct MetricFamily {
  std::string name;
  std::string help;
  MetricType type = MetricType::Untyped;
  std::vector<ClientMetric> metric;
};

}  // namespace tessera::metrics
