// Anything that yields metric families at scrape time (prometheus-cpp's Collectable): families,
// registries, and collectors that read their values when asked (process metrics).
#pragma once

#include <vector>

#include "server/metrics/client_metric.h"

namespace tessera::metrics {

class Collectable {
 public:
  virtual ~Collectable() = default;
  // A snapshot; families with no metric are left out. Safe to call from any thread.
  virtual std::vector<MetricFamily> Collect() const = 0;
};

}  // namespace tessera::metrics
