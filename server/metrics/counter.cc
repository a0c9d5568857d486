#include "server/metrics/counter.h"

namespace tessera::metrics {

void Counter::Increment(double value) {
  if (!(value >= 0.0)) return;  // negative or NaN
  value_.add(value);
}

ClientMetric Counter::Collect() const {
  ClientMetric metric;
  metric.counter.value = Value();
  return metric;
}

}  // namespace tessera::metrics
