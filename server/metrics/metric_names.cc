#include "server/metrics/metric_names.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace tessera::metrics {

namespace {

bool is_alpha_(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string quoted(std::string_view s) {
  return absl::StrCat("\"", std::string(s), "\"");
}

}  // namespace

bool is_valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = is_alpha_(c) || c == ':' || (i > 0 && is_digit(c));
    if (!ok) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(is_alpha_(c) || (i > 0 && is_digit(c)))) return false;
  }
  return true;
}

absl::Status check_family_name(std::string_view name, MetricType type) {
  if (!is_valid_metric_name(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name ", quoted(name), " is not [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (type == MetricType::Counter && !name.ends_with("_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter ", quoted(name), " must end in \"_total\""));
  }
  if (type == MetricType::Histogram &&
      (name.ends_with("_bucket") || name.ends_with("_sum") || name.ends_with("_count"))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "histogram ", quoted(name), " must not end in _bucket, _sum or _count (its samples do)"));
  }
  return absl::OkStatus();
}

absl::Status check_label_names(const Labels& labels, MetricType type) {
  for (const auto& [name, value] : labels) {
    if (!is_valid_label_name(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label name ", quoted(name), " is not [a-zA-Z_][a-zA-Z0-9_]* without a leading __"));
    }
    if (type == MetricType::Histogram && name == "le") {
      return absl::InvalidArgumentError("label name \"le\" is reserved for histogram buckets");
    }
  }
  return absl::OkStatus();
}

void fatal_metric_error(std::string_view message) {
  std::fprintf(stderr, "tessera metrics: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::metrics
