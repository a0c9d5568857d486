// Who may call tessera.v1.Generation and tessera.v1.Admin over gRPC: the one credential scheme the
// OpenAI API uses too. With an API key configured (api_key, api_key_file or $TESSERA_API_KEY),
// every call must carry the metadata "authorization: Bearer <key>" (UNAUTHENTICATED otherwise);
// the admin token is accepted in its place (it is the stronger credential: an operator's client
// sends one header, not two). grpc.health.v1 and server reflection are not ours and stay open.
//
// The check runs in each handler, on the call's metadata, rather than in an
// grpc::AuthMetadataProcessor: a processor attaches to TLS server credentials only (plaintext
// would go unguarded) and sees no method, so it could not leave the health service open; and a
// gRPC C++ server interceptor cannot end a call with a status of its choosing. In the handler the
// same code guards plaintext, TLS and mTLS alike. Comparisons take time that depends on the
// lengths only (bearer_token.h).
#pragma once

#include <grpcpp/server_context.h>

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera::server {

class CallAuth {
 public:
  CallAuth(std::string api_key, std::string admin_token)
      : api_key_(std::move(api_key)), admin_token_(std::move(admin_token)) {}

  // OK when no API key is configured, or `authorization` (the metadata's value; nullopt when the
  // call has none) carries the API key or the admin token. UNAUTHENTICATED otherwise, with a
  // message saying whether the key was missing or wrong.
  absl::Status authenticate(std::optional<std::string_view> authorization) const;

  // True when an admin token is configured and `authorization` carries it: such a caller sees
  // host details (memory, device and CPU names, file paths) that others do not.
  bool is_admin(std::optional<std::string_view> authorization) const;

  bool api_key_required() const { return !api_key_.empty(); }

 private:
  const std::string api_key_;
  const std::string admin_token_;
};

// The call's "authorization" metadata, if it has one.
std::optional<std::string_view> call_authorization(const grpc::CallbackServerContext& context);

}  // namespace tessera::server
