// Overlap of tensors' byte ranges inside one file: two tensors that share bytes are a corrupt or
// hostile header (a write through one would be a write to the other, and neither converter
// writes files that way), refused by GgufFile and SafetensorsFile on open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace tessera {

// [begin, end) bytes of a file's data section.
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Two ranges of `ranges` that share at least one byte, as indices (the one that starts first,
// then the other); nullopt when none do. Empty ranges share nothing. O(n log n).
std::optional<std::pair<size_t, size_t>> find_overlap(std::span<const ByteRange> ranges);

}  // namespace tessera
