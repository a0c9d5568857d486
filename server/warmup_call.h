// The Admin.Warmup stream: checks the admin token, starts a warmup on the served model, and
// writes one WarmupProgress per finished GEMM, then the final table. A thread of the call's own
// waits for the job's progress and for each write to complete, so no gRPC thread ever blocks;
// the client's cancel cancels the warmup.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "server/serving_state.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// The reactor for one call; it deletes itself when the call is done.
grpc::ServerWriteReactor<tessera::v1::WarmupProgress>* start_warmup_call(
    grpc::CallbackServerContext* context, const tessera::v1::WarmupRequest& request,
    ServingState& state, const std::string& admin_token);

// Whether the call's metadata carries "authorization: Bearer <token>" (any token passes when
// `token` is empty).
bool call_authorized(const grpc::CallbackServerContext& context, const std::string& token);

}  // namespace tessera::server
