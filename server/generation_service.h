// tessera.v1.Generation on the gRPC callback API. Generate and GenerateStream are reactors
// (generate_calls.h); Tokenize, ListModels and GetModelInfo answer at once on the default
// reactor. Methods that take strings are registered raw so that the server parses requests itself
// and can name the field of a malformed one (proto_codec.h). Every method first checks the
// caller's API key (call_auth.h); GetModelInfo and ListModels leave the host details out for a
// caller without the admin token (host_details.h).
#pragma once

#include "server/call_auth.h"
#include "server/output_delivery.h"
#include "server/serving_state.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::server {

using GenerationServiceBase = tessera::v1::Generation::WithRawCallbackMethod_Generate<
    tessera::v1::Generation::WithRawCallbackMethod_GenerateStream<
        tessera::v1::Generation::WithRawCallbackMethod_Tokenize<
            tessera::v1::Generation::WithCallbackMethod_ListModels<
                tessera::v1::Generation::WithRawCallbackMethod_GetModelInfo<
                    tessera::v1::Generation::Service>>>>>;

class GenerationService final : public GenerationServiceBase {
 public:
  // `delivery` runs the Generate calls' output pumps; it outlives the service's calls.
  GenerationService(ServingState& state, const CallAuth& auth, OutputDelivery& delivery)
      : state_(state), auth_(auth), delivery_(delivery) {}

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const tessera::v1::ListModelsRequest* request,
                                       tessera::v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  ServingState& state_;
  const CallAuth& auth_;
  OutputDelivery& delivery_;
};

}  // namespace tessera::server
