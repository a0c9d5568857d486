// User strings echoed in error messages (an unknown model name, an unknown JSON field) are cut
// to a few hundred bytes, so an error never carries a client's megabytes back to it or into the
// logs. One helper for the gRPC and the OpenAI APIs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::server {

inline constexpr size_t kMaxEchoedBytes = 256;

// `text` when it has at most `max_bytes` bytes; otherwise its longest prefix of at most
// `max_bytes` bytes that ends on a UTF-8 character boundary, followed by "...". Bytes that are not
// UTF-8 are kept as they are (the cut only avoids splitting a well-formed character).
std::string echoed_text(std::string_view text, size_t max_bytes = kMaxEchoedBytes);

}  // namespace tessera::server
