// gRPC message size limits. Requests are capped at max_message_bytes. Answers can be larger than
// the request that asked for them -- a Tokenize of text near the limit answers with one id and
// one token-bytes entry per token -- so the send limit is derived from the receive limit: each
// token covers at least one byte of the request's text and costs at most a 5-byte varint id, a
// 1-byte tag, a length of at most 2 bytes and its own bytes (for byte-level vocabularies about
// the bytes it covers), i.e. about 9 bytes per request byte; chat templates add a bounded
// number of tokens per message. kSendFactor leaves room above that.
#pragma once

#include <cstdint>

namespace tessera::server {

inline constexpr int64_t kSendFactor = 16;

// The largest message the server receives: max_message_bytes, capped at INT32_MAX (gRPC's int).
int max_receive_message_bytes(int64_t max_message_bytes);

// The largest message the server sends: kSendFactor x max_message_bytes, capped at INT32_MAX.
int max_send_message_bytes(int64_t max_message_bytes);

}  // namespace tessera::server
