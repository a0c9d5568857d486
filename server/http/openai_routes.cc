#include "server/http/openai_routes.h"

#include <ctime>
#include <utility>

#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/http/openai_call.h"
#include "server/http/openai_errors.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"

namespace tessera::server {

namespace {

using nlohmann::json;

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = to_json_text(body);
  return r;
}

HttpHandler generation_route(OpenAiEndpoint endpoint, ServingState& state) {
  return [endpoint, &state](const HttpRequest& request) {
    absl::StatusOr<OpenAiRequest> parsed = parse_openai_request(endpoint, request.body);
    if (!parsed.ok()) {
      state.count_rejected(parsed.status().code());
      return openai_error_from_status(parsed.status());
    }
    absl::StatusOr<HttpResponse> response = start_openai_call(*std::move(parsed), state);
    if (!response.ok()) return openai_error_from_status(response.status());
    return *std::move(response);
  };
}

HttpResponse models(const ServingState& state) {
  const ServedModel* model = state.model();
  if (model == nullptr) return openai_error(503, "the model is still loading");
  const json entry = {{"id", model->id()},
                      {"object", "model"},
                      {"created", static_cast<int64_t>(std::time(nullptr))},
                      {"owned_by", "tessera"},
                      {"max_model_len", model->limits().max_model_len}};
  return json_response(200, {{"object", "list"}, {"data", json::array({entry})}});
}

HttpResponse health(const ServingState& state) {
  const Phase phase = state.phase();
  if (phase == Phase::kServing) return json_response(200, {{"status", "ok"}});
  std::string message = std::string("not serving: ") + phase_name(phase);
  // A fault says what went wrong (it stays the reason until a restart).
  if (phase == Phase::kFaulted) message += ": " + state.fault_reason();
  return openai_error(503, std::move(message));
}

}  // namespace

absl::Status add_openai_routes(HttpServer& server, ServingState& state) {
  server.set_error_formatter(
      [](int status, std::string message) { return openai_error(status, std::move(message)); });
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "POST", "/v1/completions", generation_route(OpenAiEndpoint::kCompletions, state)));
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "POST", "/v1/chat/completions", generation_route(OpenAiEndpoint::kChat, state)));
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "GET", "/v1/models", [&state](const HttpRequest&) { return models(state); },
      /*token_required=*/true));
  TESSERA_RETURN_IF_ERROR(server.add_route(
      "GET", "/health", [&state](const HttpRequest&) { return health(state); }));
  return absl::OkStatus();
}

}  // namespace tessera::server
