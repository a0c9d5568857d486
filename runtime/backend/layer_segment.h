// A pipeline stage of a model split over devices: which backend runs which decoder layers. A
// model's segments, in pipeline order, cover its layers once each in ascending contiguous ranges;
// the embeddings run on the first, the final norm and lm_head on the last, and each segment's
// layers keep their KV cache on its backend.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "runtime/backend.h"

namespace tessera {

struct LayerSegment {
  Backend* backend = nullptr;
  int32_t first_layer = 0;
  int32_t num_layers = 0;
  int32_t end_layer() const { return first_layer + num_layers; }
};

// OK when `segments` is non-empty, every backend set, every segment holds at least one layer,
// and together they cover [0, num_layers) in order; otherwise names the first that does not.
absl::Status validate_segments(std::span<const LayerSegment> segments, int32_t num_layers);

}  // namespace tessera
