#include "server/call_auth.h"

#include "server/metrics/bearer_token.h"

namespace tessera::server {

absl::Status CallAuth::authenticate(std::optional<std::string_view> authorization) const {
  if (api_key_.empty()) return absl::OkStatus();
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "this server requires an API key: send the metadata \"authorization: Bearer <key>\"");
  }
  // Both checks run, so that the time taken does not tell which credential was close.
  const bool key = bearer_token_matches(*authorization, api_key_);
  const bool admin = !admin_token_.empty() && bearer_token_matches(*authorization, admin_token_);
  if (key || admin) return absl::OkStatus();
  return absl::UnauthenticatedError(
      "wrong API key: the metadata \"authorization\" must be \"Bearer <key>\" with this server's "
      "API key");
}

bool CallAuth::is_admin(std::optional<std::string_view> authorization) const {
  return !admin_token_.empty() && authorization.has_value() &&
         bearer_token_matches(*authorization, admin_token_);
}

std::optional<std::string_view> call_authorization(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace tessera::server
