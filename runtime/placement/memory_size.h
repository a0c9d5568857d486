// Memory amounts as users write them ("40GiB", "1.5 GB", "123456789") and as logs print them
// ("15.3 GiB"). Units follow accelerate's convert_file_size_to_int: KB/MB/GB/TB are powers of
// 1000, KiB/MiB/GiB/TiB powers of 1024, B is bytes; units are case-insensitive.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

// Bytes in `text`: a plain non-negative integer (bytes), or a number (decimals allowed, e.g.
// "1.5GiB") followed by an optional space and a unit. Fractions of a byte are truncated
// ("1.0001KB" is 1000). Errors (INVALID_ARGUMENT, naming `key` and `text`): empty text, a
// negative or malformed number, an unknown unit, a fractional amount of plain bytes, and an
// amount past 2^64 - 1 bytes.
absl::StatusOr<uint64_t> parse_memory_size(std::string_view text, std::string_view key);

// `bytes` for humans, with binary units and one decimal: "512 B", "1.0 KiB", "15.3 GiB".
std::string format_memory_size(uint64_t bytes);

}  // namespace tessera
