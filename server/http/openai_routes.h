// The OpenAI-compatible API on its own listener:
//   POST /v1/completions        prompt: string, list of strings, token ids, or lists of them
//   POST /v1/chat/completions   messages; content a string or a list of text parts
//     (both: whole JSON, or server-sent events with "stream": true, ending "data: [DONE]")
//   GET  /v1/models             the served model
//   GET  /health                200 while serving; 503 while loading, warming up or draining
// The /v1 routes need "Authorization: Bearer <api key>" when the server has one. Every error,
// the listener's own included, is in OpenAI's shape (openai_errors.h).
#pragma once

#include "absl/status/status.h"
#include "server/http/http_server.h"
#include "server/serving_state.h"

namespace tessera::server {

// Adds the routes and the error shape to `server` (before its start()); `state` outlives it.
absl::Status add_openai_routes(HttpServer& server, ServingState& state);

}  // namespace tessera::server
