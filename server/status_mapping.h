// The one place where runtime status codes become gRPC status codes.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera::server {

// Same code (absl and gRPC share the canonical code space, mapped explicitly here), same message;
// payloads are dropped.
grpc::Status to_grpc_status(const absl::Status& status);

}  // namespace tessera::server
