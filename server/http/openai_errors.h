// Errors in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, with the HTTP status
// codes clients act on. A status from the shared request rules (server/request_validation.h)
// names the field as tessera.proto spells it ("sampling.temperature: ..."); here it is renamed to
// the OpenAI field ("temperature: ...", param "temperature").
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/http/http_message.h"

namespace tessera::server {

// 400 invalid_request_error, 401 authentication_error, 404 not_found_error, 413, 429
// rate_limit_error, 503 service_unavailable; `param` empty = null.
HttpResponse openai_error(int status, std::string message, std::string_view param = {});

// INVALID_ARGUMENT, OUT_OF_RANGE, FAILED_PRECONDITION -> 400; NOT_FOUND -> 404 (code
// model_not_found for the model field); RESOURCE_EXHAUSTED -> 429; UNAVAILABLE -> 503;
// UNAUTHENTICATED -> 401; anything else 500.
HttpResponse openai_error_from_status(const absl::Status& status);

// "sampling.temperature: 3 is outside [0, 100]" -> "temperature: 3 is outside [0, 100]".
std::string to_openai_field_names(std::string_view message);

}  // namespace tessera::server
