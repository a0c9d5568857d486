// The metric families of one exporter (prometheus-cpp's prometheus::Registry). Families are
// added through the builders (BuildCounter().Name(...).Help(...).Register(registry)) and live
// as long as the registry. Collect() gives every family, sorted by name.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/metrics/collectable.h"
#include "server/metrics/counter.h"
#include "server/metrics/family.h"
#include "server/metrics/gauge.h"
#include "server/metrics/histogram.h"
#include "server/metrics/labels.h"

namespace tessera::metrics {

template <typename T>
class Builder;

class Registry : public Collectable {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  std::vector<MetricFamily> Collect() const override;

 private:
  template <typename T>
  friend class Builder;

  // The family `name`: created, or the existing one when it has the same type and constant
  // labels. A bad name, or a clash with a different family of that name, is fatal.
  template <typename T>
  Family<T>& Add(const std::string& name, const std::string& help, const Labels& constant_labels);

  using MakeFamily = std::unique_ptr<Collectable> (*)(const std::string& name,
                                                      const std::string& help,
                                                      const Labels& constant_labels);
  struct Entry {
    MetricType type;
    Labels constant_labels;
    std::unique_ptr<Collectable> family;  // a Family<T> with T::metric_type == type
  };
  // The type-independent part of Add(): checks, and finds or creates the entry.
  Entry& add_entry(const std::string& name, const std::string& help, MetricType type,
                   const Labels& constant_labels, MakeFamily make);

  mutable std::mutex mutex_;
  std::map<std::string, Entry> families_;  // by name: Collect() comes out sorted
};

template <typename T>
Family<T>& Registry::Add(const std::string& name, const std::string& help,
                         const Labels& constant_labels) {
  MakeFamily make = [](const std::string& n, const std::string& h,
                       const Labels& l) -> std::unique_ptr<Collectable> {
    return std::make_unique<Family<T>>(n, h, l);
  };
  Entry& entry = add_entry(name, help, T::metric_type, constant_labels, make);
  return static_cast<Family<T>&>(*entry.family);
}

}  // namespace tessera::metrics
