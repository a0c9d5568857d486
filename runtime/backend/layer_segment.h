// A pipeline stage of a model split over devices: which backends run which decoder layers. A
// model's segments, in pipeline order, cover its layers once each in ascending contiguous ranges;
// the embeddings run on the first, the final norm and lm_head on the last, and each segment's
// layers keep their KV cache on its backends.
//
// With tensor parallelism a stage is a group of ranks, each holding a slice of every layer of the
// stage (its heads, its part of the MLP, its rows of the vocabulary) on its own backend, joined by
// a Communicator; every stage has the same number of ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "runtime/backend.h"
#include "runtime/backend/communicator.h"

namespace tessera {

struct LayerSegment {
  Backend* backend = nullptr;  // rank 0's (the stage's only backend without tensor parallelism)
  int32_t first_layer = 0;
  int32_t num_layers = 0;
  // Tensor parallelism: every rank's backend (ranks[0] == backend) and communicator, in rank
  // order. Both empty for one rank.
  std::vector<Backend*> ranks;
  std::vector<Communicator*> comms;

  int32_t end_layer() const { return first_layer + num_layers; }
  int32_t num_ranks() const { return ranks.empty() ? 1 : static_cast<int32_t>(ranks.size()); }
  Backend& rank_backend(int32_t rank) const { return ranks.empty() ? *backend : *ranks[rank]; }
  // Null for one rank.
  Communicator* comm(int32_t rank) const { return comms.empty() ? nullptr : comms[rank]; }
};

// OK when `segments` is non-empty, every backend set, every segment holds at least one layer,
// together they cover [0, num_layers) in order, and each has the same number of ranks, with a
// communicator per rank when there are several; otherwise names the first that does not.
absl::Status validate_segments(std::span<const LayerSegment> segments, int32_t num_layers);

}  // namespace tessera
