// Label sets of the metrics module: label name -> value, ordered by name (prometheus-cpp's
// prometheus::Labels), so that equal sets compare equal and exposition order is stable.
#pragma once

#include <map>
#include <string>

namespace tessera::metrics {

using Labels = std::map<std::string, std::string>;

}  // namespace tessera::metrics
