// One OpenAI generation request in flight: its engine requests (one per prompt and choice) and
// the ResponseProducer that turns their outputs into the HTTP response, whole (JSON) or streamed
// (server-sent events, ending with "data: [DONE]"). Submitting goes through submit_generate, the
// path gRPC's Generate takes (validation, tokenizing, the engine's bounded queue). The engine's
// notifier only wakes the connection; outputs are read on the connection's strand, and a reader
// slower than the engine finds them merged (OutputStream), so its memory stays bounded.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/http/http_message.h"
#include "server/http/openai_request.h"
#include "server/serving_state.h"

namespace tessera::server {

// Submits every prompt x n choices, and answers with the producer (200: whole JSON, or
// text/event-stream when request.stream). On a rejection those already submitted are cancelled
// and the error is returned (the request rules' message, UNAVAILABLE, RESOURCE_EXHAUSTED).
absl::StatusOr<HttpResponse> start_openai_call(OpenAiRequest request, ServingState& state);

}  // namespace tessera::server
