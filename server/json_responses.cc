#include "server/json_responses.h"

namespace tessera::server {

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = body.dump(2) + "\n";
  return r;
}

HttpResponse error_response(int status, const std::string& message) {
  return json_response(status, nlohmann::json{{"error", message}});
}

}  // namespace tessera::server
