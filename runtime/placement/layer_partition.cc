#include "runtime/placement/layer_partition.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace tessera {
namespace {

constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();
using u128 = unsigned __int128;
// Lexicographic (sum of squared layer bytes, sum of squared full costs).
using Score = std::pair<u128, u128>;
constexpr Score kInfScore = {~u128{0}, ~u128{0}};

class Partitioner {
 public:
  Partitioner(const std::vector<uint64_t>& layer_bytes, const std::vector<uint64_t>& budgets,
              const SegmentCost& cost)
      : n_(static_cast<int32_t>(layer_bytes.size())), budgets_(budgets), cost_(cost) {
    prefix_.assign(1, 0);
    for (uint64_t b : layer_bytes) prefix_.push_back(prefix_.back() + b);
  }

  int32_t num_layers() const { return n_; }

  uint64_t cost(int32_t begin, int32_t end) const { return begin == end ? 0 : cost_(begin, end); }
  uint64_t layers(int32_t begin, int32_t end) const { return prefix_[end] - prefix_[begin]; }

  // Layers [start, n) onto devices [first_device, end): each device takes the longest run that
  // fits. Appends one segment per device to `out`; returns the end of the layers placed.
  int32_t fill_greedy(int32_t start, size_t first_device, std::vector<LayerSegment>* out) const {
    int32_t at = start;
    for (size_t d = first_device; d < budgets_.size(); ++d) {
      int32_t end = at;
      while (end < n_ && cost(at, end + 1) <= budgets_[d]) ++end;
      out->push_back({at, end});
      at = end;
    }
    return at;
  }

  // Balanced segments of layers [start, n) on devices [first_device, end), appended to `out`;
  // false when they do not fit.
  bool fill_balanced(int32_t start, size_t first_device, std::vector<LayerSegment>* out) const {
    const size_t m = budgets_.size() - first_device;           // devices
    const size_t width = static_cast<size_t>(n_ - start) + 1;  // boundaries start..n
    if (m == 0) return start == n_;
    auto at = [&](size_t i) { return start + static_cast<int32_t>(i); };

    // Phase 1: the least achievable largest layer bytes of a device. best[k][i]: layers
    // [start, at(i)) on the first k devices.
    std::vector<std::vector<uint64_t>> best(m + 1, std::vector<uint64_t>(width, kInf));
    best[0][0] = 0;
    for (size_t k = 1; k <= m; ++k) {
      const uint64_t budget = budgets_[first_device + k - 1];
      for (size_t i = 0; i < width; ++i) {
        for (size_t j = 0; j <= i; ++j) {
          if (best[k - 1][j] == kInf || cost(at(j), at(i)) > budget) continue;
          best[k][i] = std::min(best[k][i], std::max(best[k - 1][j], layers(at(j), at(i))));
        }
      }
    }
    const uint64_t limit = best[m][width - 1];
    if (limit == kInf) return false;

    // Phase 2: under that limit, the most even split. Strict '<' over ascending j keeps the
    // earliest boundary, so on ties the later device takes the longer segment.
    std::vector<std::vector<Score>> score(m + 1, std::vector<Score>(width, kInfScore));
    std::vector<std::vector<size_t>> from(m + 1, std::vector<size_t>(width, 0));
    score[0][0] = {0, 0};
    for (size_t k = 1; k <= m; ++k) {
      const uint64_t budget = budgets_[first_device + k - 1];
      for (size_t i = 0; i < width; ++i) {
        for (size_t j = 0; j <= i; ++j) {
          if (score[k - 1][j] == kInfScore) continue;
          const uint64_t c = cost(at(j), at(i));
          const uint64_t l = layers(at(j), at(i));
          if (c > budget || l > limit) continue;
          const Score s = {score[k - 1][j].first + u128{l} * l,
                           score[k - 1][j].second + u128{c} * c};
          if (s < score[k][i]) {
            score[k][i] = s;
            from[k][i] = j;
          }
        }
      }
    }
    std::vector<LayerSegment> segments(m);
    size_t i = width - 1;
    for (size_t k = m; k >= 1; --k) {
      const size_t j = from[k][i];
      segments[k - 1] = {at(j), at(i)};
      i = j;
    }
    out->insert(out->end(), segments.begin(), segments.end());
    return true;
  }

  uint64_t budget(size_t device) const { return budgets_[device]; }

 private:
  const int32_t n_;
  const std::vector<uint64_t>& budgets_;
  const SegmentCost& cost_;
  std::vector<uint64_t> prefix_;  // prefix_[i]: layer bytes of [0, i)
};

}  // namespace

LayerPartition partition_sequential(const std::vector<uint64_t>& layer_bytes,
                                    const std::vector<uint64_t>& budgets, const SegmentCost& cost) {
  const Partitioner p(layer_bytes, budgets, cost);
  LayerPartition result;
  result.placed = p.fill_greedy(0, 0, &result.segments);
  return result;
}

LayerPartition partition_balanced(const std::vector<uint64_t>& layer_bytes,
                                  const std::vector<uint64_t>& budgets, const SegmentCost& cost) {
  const Partitioner p(layer_bytes, budgets, cost);
  LayerPartition result;
  if (!p.fill_balanced(0, 0, &result.segments)) {
    return partition_sequential(layer_bytes, budgets, cost);
  }
  result.placed = p.num_layers();
  return result;
}

LayerPartition partition_balanced_low_0(const std::vector<uint64_t>& layer_bytes,
                                        const std::vector<uint64_t>& budgets,
                                        const SegmentCost& cost) {
  if (budgets.size() <= 1) return partition_balanced(layer_bytes, budgets, cost);
  const Partitioner p(layer_bytes, budgets, cost);
  const int32_t n = p.num_layers();
  for (int32_t k = 0; k <= n; ++k) {
    if (p.cost(0, k) > p.budget(0)) break;  // costs only grow with k
    std::vector<LayerSegment> probe;
    if (p.fill_greedy(k, 1, &probe) != n) continue;  // the greedy fill fits whenever any split does
    LayerPartition result;
    result.segments.push_back({0, k});
    p.fill_balanced(k, 1, &result.segments);
    result.placed = n;
    return result;
  }
  return partition_sequential(layer_bytes, budgets, cost);
}

}  // namespace tessera
