// tessera.v1.Admin: GetStatus reads the serving phase and the engine's counters (atomics).
#pragma once

#include "server/serving_state.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::server {

class AdminService final : public tessera::v1::Admin::CallbackService {
 public:
  explicit AdminService(ServingState& state) : state_(state) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const tessera::v1::GetStatusRequest* request,
                                      tessera::v1::ServerStatus* response) override;

 private:
  ServingState& state_;
};

// The status as GetStatus reports it.
tessera::v1::ServerStatus server_status(const ServingState& state);

}  // namespace tessera::server
