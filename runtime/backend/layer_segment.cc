#include "runtime/backend/layer_segment.h"

#include "base/str_cat.h"

namespace tessera {

absl::Status validate_segments(std::span<const LayerSegment> segments, int32_t num_layers) {
  if (segments.empty()) return absl::InvalidArgumentError("no device holds the model's layers");
  int32_t next = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const LayerSegment& s = segments[i];
    if (s.backend == nullptr) {
      return absl::InvalidArgumentError(str_cat("layer segment ", i, " has no backend"));
    }
    if (s.num_layers <= 0 || s.first_layer != next) {
      return absl::InvalidArgumentError(
          str_cat("layer segment ", i, " on ", s.backend->name(), " holds layers ", s.first_layer,
                  "..", s.end_layer() - 1, "; expected a non-empty range starting at ", next));
    }
    if (s.num_ranks() != segments[0].num_ranks()) {
      return absl::InvalidArgumentError(str_cat("layer segment ", i, " has ", s.num_ranks(),
                                                " tensor-parallel ranks; segment 0 has ",
                                                segments[0].num_ranks()));
    }
    if (!s.ranks.empty()) {
      if (s.ranks[0] != s.backend || s.comms.size() != s.ranks.size()) {
        return absl::InvalidArgumentError(
            str_cat("layer segment ", i, ": ranks[0] must be its backend and every rank needs a "
                    "communicator (", s.ranks.size(), " ranks, ", s.comms.size(), " communicators)"));
      }
      for (size_t r = 0; r < s.ranks.size(); ++r) {
        if (s.ranks[r] == nullptr || s.comms[r] == nullptr || s.comms[r]->rank() != static_cast<int32_t>(r) ||
            s.comms[r]->size() != s.num_ranks()) {
          return absl::InvalidArgumentError(str_cat("layer segment ", i, ": rank ", r,
                                                    " has no backend or a communicator of another rank"));
        }
      }
    }
    next = s.end_layer();
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(
        str_cat("layer segments cover layers 0..", next - 1, " of ", num_layers));
  }
  return absl::OkStatus();
}

}  // namespace tessera
