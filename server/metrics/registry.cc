#include "server/metrics/registry.h"

#include "absl/strings/str_cat.h"
#include "server/metrics/metric_names.h"

namespace tessera::metrics {

Registry::Entry& Registry::add_entry(const std::string& name, const std::string& help,
                                     MetricType type, const Labels& constant_labels,
                                     MakeFamily make) {
  if (absl::Status s = check_family_name(name, type); !s.ok()) {
    fatal_metric_error(std::string(s.message()));
  }
  if (absl::Status s = check_label_names(constant_labels, type); !s.ok()) {
    fatal_metric_error(absl::StrCat(name, ": ", s.message()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = families_.find(name); it != families_.end()) {
    if (it->second.type != type || it->second.constant_labels != constant_labels) {
      fatal_metric_error(absl::StrCat("metric \"", name, "\" is already registered as a ",
                                      metric_type_name(it->second.type),
                                      " with other constant labels or another type"));
    }
    return it->second;
  }
  auto [it, inserted] =
      families_.emplace(name, Entry{type, constant_labels, make(name, help, constant_labels)});
  return it->second;
}

std::vector<MetricFamily> Registry::Collect() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<MetricFamily> out;
  for (const auto& [name, entry] : families_) {
    for (MetricFamily& family : entry.family->Collect()) out.push_back(std::move(family));
  }
  return out;
}

}  // namespace tessera::metrics
