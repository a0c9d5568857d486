// Splitting the pipeline of decoder layers into one contiguous segment per device under
// per-device byte budgets: the arithmetic behind device_map=sequential, balanced and
// balanced_low_0. Works on byte counts only; the planner (placement_planner.h) supplies the
// cost of a segment, which includes what travels with its layers (embeddings with layer 0,
// final norm, lm_head and lm_head's buffers with the last layer).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera {

struct LayerSegment {
  int32_t begin = 0;  // layers [begin, end); empty when begin == end
  int32_t end = 0;
  int32_t size() const { return end - begin; }
};

struct LayerPartition {
  std::vector<LayerSegment> segments;  // one per budget, in device order, contiguous from 0
  int32_t placed = 0;                  // layers [0, placed) are placed; all of them when it fits
};

// Bytes a device needs to hold layers [begin, end), begin < end, with what travels with them.
// It must not decrease when `end` grows, nor when `begin` shrinks (the greedy fill relies on it).
using SegmentCost = std::function<uint64_t(int32_t begin, int32_t end)>;

// Each function takes the bytes of each decoder layer alone (`layer_bytes`, one per layer), the
// weight budget of each device in pipeline order, and the full cost of a segment, which is what
// must fit in a budget.

// Fills device 0 with as many layers as its budget takes, then device 1, ... (accelerate's
// "sequential"). When the layers do not all fit, `placed` says how far it got.
LayerPartition partition_sequential(const std::vector<uint64_t>& layer_bytes,
                                    const std::vector<uint64_t>& budgets, const SegmentCost& cost);

// Spreads the decoder layers evenly: the largest per-device sum of layer bytes is as small as
// the budgets allow (about total / N each), and among such splits the most even one (least sum
// of squares of layer bytes, then of full costs, so an extra layer goes to a device that does
// not also hold the embeddings or lm_head); remaining ties leave the heavier segment on the
// later device. Embeddings and lm_head count against the budgets but are not balanced: they
// would otherwise push whole layers off the end devices for a difference of a few bytes. When
// the layers cannot fit, the result is partition_sequential's (the fill that gets furthest).
LayerPartition partition_balanced(const std::vector<uint64_t>& layer_bytes,
                                  const std::vector<uint64_t>& budgets, const SegmentCost& cost);

// Device 0 holds the fewest leading layers that let the rest fit on the other devices, which
// are balanced as above (accelerate's "balanced_low_0": keep device 0 free for other work).
// With one device it is partition_balanced.
LayerPartition partition_balanced_low_0(const std::vector<uint64_t>& layer_bytes,
                                        const std::vector<uint64_t>& budgets,
                                        const SegmentCost& cost);

}  // namespace tessera
