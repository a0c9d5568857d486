#include "server/metrics/gauge.h"

namespace tessera::metrics {

ClientMetric Gauge::Collect() const {
  ClientMetric metric;
  metric.gauge.value = Value();
  return metric;
}

}  // namespace tessera::metrics
