#include "runtime/output/stop_strings.h"

#include <algorithm>
#include <utility>

namespace tessera {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  held_.append(piece);
  if (stops_.empty()) return Result{std::exchange(held_, {}), false};

  // The earliest complete stop string ends the text.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    Result r{held_.substr(0, first), true};
    held_.clear();
    return r;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  Result r{held_.substr(0, held_.size() - keep), false};
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopStringMatcher::flush() { return std::exchange(held_, {}); }

}  // namespace tessera
