#include "server/metrics/client_metric.h"

namespace tessera::metrics {

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
    case MetricType::Untyped:
      return "untyped";
  }
  return "untyped";
}

}  // namespace tessera::metrics
