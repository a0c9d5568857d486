// A value that goes up and down (running requests, KV blocks in use). Lock-free.
// Method names follow prometheus-cpp's prometheus::Gauge.
#pragma once

#include "server/metrics/atomic_double.h"
#include "server/metrics/client_metric.h"

namespace tessera::metrics {

class Gauge {
 public:
  static constexpr MetricType metric_type = MetricType::Gauge;

  Gauge() = default;
  explicit Gauge(double value) : value_(value) {}
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Increment() { value_.add(1.0); }
  void Increment(double value) { value_.add(value); }
  void Decrement() { value_.add(-1.0); }
  void Decrement(double value) { value_.add(-value); }
  void Set(double value) { value_.store(value); }
  double Value() const { return value_.load(); }

  ClientMetric Collect() const;

 private:
  AtomicDouble value_;
};

}  // namespace tessera::metrics
