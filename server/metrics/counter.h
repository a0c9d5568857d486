// A value that only goes up (requests served, tokens generated). Lock-free.
// Method names follow prometheus-cpp's prometheus::Counter (PascalCase, unlike the rest of
// tessera) so that switching to prometheus-cpp is a change of includes.
#pragma once

#include "server/metrics/atomic_double.h"
#include "server/metrics/client_metric.h"

namespace tessera::metrics {

class Counter {
 public:
  static constexpr MetricType metric_type = MetricType::Counter;

  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment() { value_.add(1.0); }
  // Adds `value`; a negative or NaN value is ignored (a counter never goes down).
  void Increment(double value);
  double Value() const { return value_.load(); }

  ClientMetric Collect() const;

 private:
  AtomicDouble value_;
};

}  // namespace tessera::metrics
