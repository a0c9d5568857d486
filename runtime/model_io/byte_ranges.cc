#include "runtime/model_io/byte_ranges.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace tessera {

std::optional<std::pair<size_t, size_t>> find_overlap(std::span<const ByteRange> ranges) {
  std::vector<size_t> order;
  order.reserve(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i].end) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ranges[a].begin != ranges[b].begin ? ranges[a].begin < ranges[b].begin : a < b;
  });
  // Sweep in order of begin, keeping the range that reaches furthest so far: a range that starts
  // before that end shares bytes with it.
  std::optional<size_t> furthest;
  for (size_t i : order) {
    if (furthest.has_value() && ranges[i].begin < ranges[*furthest].end) {
      return std::make_pair(*furthest, i);
    }
    if (!furthest.has_value() || ranges[i].end > ranges[*furthest].end) furthest = i;
  }
  return std::nullopt;
}

}  // namespace tessera
