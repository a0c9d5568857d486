// What the Prometheus data model allows as metric and label names, and the fatal error for
// breaking it. Names are written in code, never taken from input, so a bad one is a programming
// error: it stops the process at registration with a message naming it (prometheus-cpp throws).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "server/metrics/client_metric.h"
#include "server/metrics/labels.h"

namespace tessera::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool is_valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, and not starting with "__" (reserved for Prometheus itself).
bool is_valid_label_name(std::string_view name);

// Checks a family's name against its type: counters end in "_total"; histograms are not named
// with the suffixes their samples get (_bucket, _sum, _count).
absl::Status check_family_name(std::string_view name, MetricType type);
// Checks the label names of one metric of a family of `type` (histograms reserve "le").
absl::Status check_label_names(const Labels& labels, MetricType type);

// Prints "tessera metrics: <message>" to stderr and aborts.
[[noreturn]] void fatal_metric_error(std::string_view message);

}  // namespace tessera::metrics
