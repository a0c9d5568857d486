// Prometheus text exposition format 0.0.4 (what /metrics answers with Content-Type
// "text/plain; version=0.0.4"): per family a # HELP and a # TYPE line, then one sample per
// line; histograms as cumulative _bucket{le="..."} samples ending with le="+Inf", then _sum and
// _count. Families come out sorted by name, samples in the order collected (by label set).
// Class and method name follow prometheus-cpp's prometheus::TextSerializer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/metrics/client_metric.h"

namespace tessera::metrics {

inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

class TextSerializer {
 public:
  std::string Serialize(const std::vector<MetricFamily>& families) const;
};

// A sample value: shortest round-trip decimal ("1", "0.25", "1e+21"), "+Inf", "-Inf", "NaN".
std::string format_metric_value(double value);
// A label value between its quotes: \ -> \\, " -> \", newline -> \n; invalid UTF-8 becomes
// U+FFFD, since the format is UTF-8.
std::string escape_label_value(std::string_view value);
// HELP text: \ -> \\, newline -> \n; invalid UTF-8 becomes U+FFFD.
std::string escape_help(std::string_view help);

}  // namespace tessera::metrics
