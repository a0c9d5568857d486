// Builders that register a family in a registry, as prometheus-cpp spells it:
//   auto& family = BuildCounter().Name("tessera_x_total").Help("...").Register(registry);
//   Counter& c = family.Add({{"code", "OK"}});
#pragma once

#include <string>

#include "server/metrics/counter.h"
#include "server/metrics/family.h"
#include "server/metrics/gauge.h"
#include "server/metrics/histogram.h"
#include "server/metrics/labels.h"
#include "server/metrics/registry.h"

namespace tessera::metrics {

template <typename T>
class Builder {
 public:
  Builder& Name(const std::string& name) {
    name_ = name;
    return *this;
  }
  Builder& Help(const std::string& help) {
    help_ = help;
    return *this;
  }
  // Labels every metric of the family carries (for example {{"device", "cpu"}}).
  Builder& Labels(const metrics::Labels& labels) {
    labels_ = labels;
    return *this;
  }
  Family<T>& Register(Registry& registry) { return registry.Add<T>(name_, help_, labels_); }

 private:
  std::string name_;
  std::string help_;
  metrics::Labels labels_;
};

inline Builder<Counter> BuildCounter() {
  return {};
}
inline Builder<Gauge> BuildGauge() {
  return {};
}
inline Builder<Histogram> BuildHistogram() {
  return {};
}

}  // namespace tessera::metrics
