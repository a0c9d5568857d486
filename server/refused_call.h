// A server-streaming call refused before it started (UNAUTHENTICATED, ...): the reactor finishes
// at once with the status and deletes itself when gRPC is done with it.
#pragma once

#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

namespace tessera::server {

template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace tessera::server
