// Request parsing and response serialization for the raw (ByteBuffer) gRPC methods. The server
// parses requests itself so that a malformed one gets a clear error: protobuf rejects invalid
// UTF-8 in proto3 string fields while parsing, which gRPC would answer with a bare INTERNAL; here
// it becomes INVALID_ARGUMENT naming the field ("chat.messages[1].content: invalid UTF-8 ...").
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"

namespace tessera::server {

// Parses `buffer` into `message`; INVALID_ARGUMENT naming the first field with invalid UTF-8,
// or saying the bytes are not a `message` at all.
absl::Status parse_request(const grpc::ByteBuffer& buffer, google::protobuf::Message& message);

// Serializes `message` into `buffer` (replacing its contents).
absl::Status serialize_response(const google::protobuf::Message& message, grpc::ByteBuffer& buffer);

// The path of the first string field of `wire` (an encoded message of type `descriptor`) that
// is not valid UTF-8, with the reason, e.g. "prompt: invalid UTF-8 at byte offset 3 (byte 0xFF)";
// empty when there is none (or `wire` cannot be read at all).
std::string find_invalid_utf8_field(const std::string& wire,
                                    const google::protobuf::Descriptor& descriptor);

}  // namespace tessera::server
