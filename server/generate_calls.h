// The two generating RPCs as callback reactors. Each call parses and validates its request,
// tokenizes it (chat template first), submits it to the engine, and then only reads its own
// OutputStream: the stream's notifier (called on the engine thread when output is pushed) wakes
// the reactor, which writes one chunk per engine output and pulls the next in OnWriteDone. A
// client cancel sets the request's cancel flag; a client deadline travels as Request::deadline so
// that the engine ends the request with DEADLINE_EXCEEDED. Reactors never block and never touch
// engine state.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/request/request.h"
#include "server/output_delivery.h"
#include "server/serving_state.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// A new request id ("req-" and 16 hex digits) for requests that bring none.
std::string new_request_id();

struct SubmittedRequest {
  RequestHandle handle;
  ServedModel* model = nullptr;
};

// Validates, tokenizes and submits one request. `deadline` is the call's (system clock; max()
// when none). Errors are ready for the client: UNAVAILABLE while loading or draining, the
// validation errors, and the engine's (RESOURCE_EXHAUSTED when the queue is full, ...).
absl::StatusOr<SubmittedRequest> submit_generate(const tessera::v1::GenerateRequest& request,
                                                 const std::string& request_id, ServingState& state,
                                                 std::chrono::system_clock::time_point deadline);

// The request id a call logs under: the client's when usable, a new one otherwise.
std::string request_id_for(const tessera::v1::GenerateRequest& request);

// The Generate calls: the engine's outputs reach each call's reactor through `delivery`'s thread.
grpc::ServerUnaryReactor* start_generate(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                         ServingState& state, OutputDelivery& delivery);

grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate_stream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, ServingState& state,
    OutputDelivery& delivery);

}  // namespace tessera::server
