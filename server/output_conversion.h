// The engine's RequestOutput as proto: stream chunks, the unary response, finish reasons.
#pragma once

#include <string>

#include "runtime/request/request.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// kError (and kNone) have no proto value: an error ends the call with a status instead.
tessera::v1::FinishReason to_proto(FinishReason reason);

// One chunk for one engine output (tokens, text, logprobs; outcome on the last one).
void to_stream_chunk(const RequestOutput& output, const std::string& request_id,
                     const Tokenizer& tokenizer, tessera::v1::GenerateStreamChunk& chunk);

// Adds one engine output to the response being collected for a unary call.
void append_to_response(const RequestOutput& output, const Tokenizer& tokenizer,
                        tessera::v1::GenerateResponse& response);

}  // namespace tessera::server
