#include "server/http/openai_errors.h"

#include <array>
#include <utility>

#include "nlohmann/json.hpp"

namespace tessera::server {

namespace {

// tessera.proto's field paths and the OpenAI fields they come from (longest first where one is
// the prefix of another).
constexpr std::array<std::pair<std::string_view, std::string_view>, 18> kFieldNames = {{
    {"sampling.logit_bias", "logit_bias"},
    {"sampling.temperature", "temperature"},
    {"sampling.top_k", "top_k"},
    {"sampling.top_p", "top_p"},
    {"sampling.min_p", "min_p"},
    {"sampling.repetition_penalty", "repetition_penalty"},
    {"sampling.frequency_penalty", "frequency_penalty"},
    {"sampling.presence_penalty", "presence_penalty"},
    {"stopping.max_tokens", "max_tokens"},
    {"stopping.min_tokens", "min_tokens"},
    {"stopping.stop_token_ids", "stop_token_ids"},
    {"stopping.stop", "stop"},
    {"token_ids.ids", "prompt"},
    {"chat.messages", "messages"},
    {"chat.tools_json", "tools"},
    {"chat", "messages"},
    {"top_logprobs", "top_logprobs"},
    {"input", "prompt"},
}};

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

int http_status(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

// The field a message names: what precedes the first ": ", up to its first '[' or '.'.
std::string_view named_param(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos) return {};
  std::string_view field = message.substr(0, colon);
  if (field.find(' ') != std::string_view::npos) return {};
  return field.substr(0, field.find_first_of("[."));
}

}  // namespace

std::string to_openai_field_names(std::string_view message) {
  for (const auto& [proto, openai] : kFieldNames) {
    if (message.starts_with(proto) && message.size() > proto.size() &&
        (message[proto.size()] == ':' || message[proto.size()] == '[' ||
         message[proto.size()] == '.')) {
      return std::string(openai) + std::string(message.substr(proto.size()));
    }
  }
  return std::string(message);
}

HttpResponse openai_error(int status, std::string message, std::string_view param) {
  nlohmann::json error = {{"message", std::move(message)},
                          {"type", error_type(status)},
                          {"param", nullptr},
                          {"code", nullptr}};
  if (!param.empty()) error["param"] = param;
  if (status == 404 && param == "model") error["code"] = "model_not_found";
  HttpResponse response;
  response.status = status;
  response.content_type = "application/json";
  // The message may quote the client's invalid UTF-8: it becomes U+FFFD.
  response.body = nlohmann::json{{"error", std::move(error)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

HttpResponse openai_error_from_status(const absl::Status& status) {
  const std::string message =
      to_openai_field_names(std::string_view(status.message().data(), status.message().size()));
  return openai_error(http_status(status.code()), message, named_param(message));
}

}  // namespace tessera::server
