// A metric family: one name, help text and type, and one metric per label set
// (prometheus-cpp's prometheus::Family<T>, same method names). Add() takes a mutex (it may
// create the child); the child it returns is then updated lock-free, so hot paths call Add()
// once and keep the reference. Children live as long as the family (or until Remove()).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/metrics/collectable.h"
#include "server/metrics/labels.h"
#include "server/metrics/metric_names.h"

namespace tessera::metrics {

template <typename T>
class Family : public Collectable {
 public:
  // Use BuildCounter()/BuildGauge()/BuildHistogram() and Register() rather than this.
  Family(std::string name, std::string help, Labels constant_labels)
      : name_(std::move(name)),
        help_(std::move(help)),
        constant_labels_(std::move(constant_labels)) {}
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The metric with `labels` (beside the family's constant labels), created from `args` (a
  // histogram's bucket boundaries) when it does not exist yet; an existing one is returned as it
  // is. Invalid label names, or one that repeats a constant label, are fatal.
  template <typename... Args>
  T& Add(const Labels& labels, Args&&... args) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = metrics_.find(labels); it != metrics_.end()) return *it->second;
    if (absl::Status s = check_label_names(labels, T::metric_type); !s.ok()) {
      fatal_metric_error(absl::StrCat(name_, ": ", s.message()));
    }
    for (const auto& [label_name, value] : labels) {
      if (constant_labels_.contains(label_name)) {
        fatal_metric_error(absl::StrCat(name_, ": label \"", label_name,
                                        "\" is already a constant label of the family"));
      }
    }
    auto [it, inserted] =
        metrics_.emplace(labels, std::make_unique<T>(std::forward<Args>(args)...));
    return *it->second;
  }

  // Drops `metric` (a reference Add() returned; it must not be used afterwards).
  void Remove(T* metric) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(metrics_, [metric](const auto& entry) { return entry.second.get() == metric; });
  }

  bool Has(const Labels& labels) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return metrics_.contains(labels);
  }

  const std::string& GetName() const { return name_; }
  const std::string& GetHelp() const { return help_; }
  const Labels& GetConstantLabels() const { return constant_labels_; }

  // One MetricFamily with a metric per child, ordered by label set; nothing when there is no
  // child yet.
  std::vector<MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (metrics_.empty()) return {};
    MetricFamily family{name_, help_, T::metric_type, {}};
    family.metric.reserve(metrics_.size());
    for (const auto& [labels, metric] : metrics_) {
      ClientMetric collected = metric->Collect();
      Labels all = constant_labels_;
      all.insert(labels.begin(), labels.end());
      for (const auto& [label_name, value] : all) collected.label.push_back({label_name, value});
      family.metric.push_back(std::move(collected));
    }
    return {std::move(family)};
  }

 private:
  const std::string name_;
  const std::string help_;
  const Labels constant_labels_;
  mutable std::mutex mutex_;
  std::map<Labels, std::unique_ptr<T>> metrics_;
};

}  // namespace tessera::metrics
