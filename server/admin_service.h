// tessera.v1.Admin: GetStatus reads the serving phase and the engine's counters (atomics);
// Warmup tunes the served model's GEMMs (warmup_call.h). Both need the API key when one is
// configured (call_auth.h); Warmup needs the admin token too when one is configured.
#pragma once

#include <string>

#include "server/call_auth.h"
#include "server/serving_state.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::server {

class AdminService final : public tessera::v1::Admin::CallbackService {
 public:
  // `admin_token`: what Warmup requires when not empty.
  AdminService(ServingState& state, const CallAuth& auth, std::string admin_token)
      : state_(state), auth_(auth), admin_token_(std::move(admin_token)) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const tessera::v1::GetStatusRequest* request,
                                      tessera::v1::ServerStatus* response) override;
  grpc::ServerWriteReactor<tessera::v1::WarmupProgress>* Warmup(
      grpc::CallbackServerContext* context, const tessera::v1::WarmupRequest* request) override;

 private:
  ServingState& state_;
  const CallAuth& auth_;
  const std::string admin_token_;
};

// The status as GetStatus reports it.
tessera::v1::ServerStatus server_status(const ServingState& state);

}  // namespace tessera::server
