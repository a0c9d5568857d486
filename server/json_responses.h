// JSON answers of the admin listener's routes: a body with its status, and errors as
// {"error": message}.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "server/http/http_message.h"

namespace tessera::server {

HttpResponse json_response(int status, const nlohmann::json& body);
HttpResponse error_response(int status, const std::string& message);

}  // namespace tessera::server
