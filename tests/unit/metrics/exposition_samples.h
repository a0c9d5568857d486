// Test helper: the samples of a text exposition, by series ("name{labels}" exactly as written).
#pragma once

#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace tessera::testing {

inline std::map<std::string, double> exposition_samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string value = line.substr(space + 1);
    out[line.substr(0, space)] = value == "+Inf" ? 1e308 * 10 : std::stod(value);
  }
  return out;
}

inline std::optional<double> sample(const std::map<std::string, double>& samples,
                                    const std::string& series) {
  auto it = samples.find(series);
  if (it == samples.end()) return std::nullopt;
  return it->second;
}

}  // namespace tessera::testing
