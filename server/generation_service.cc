#include "server/generation_service.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "server/generate_calls.h"
#include "server/host_details.h"
#include "server/logging.h"
#include "server/proto_codec.h"
#include "server/refused_call.h"
#include "server/request_validation.h"
#include "server/status_mapping.h"

namespace tessera::server {

namespace {

// The served model, or UNAVAILABLE while it loads.
absl::StatusOr<ServedModel*> loaded_model(const ServingState& state) {
  ServedModel* model = state.model();
  if (model == nullptr) {
    return absl::UnavailableError("the model is still loading: retry when health reports SERVING");
  }
  return model;
}

absl::Status tokenize(const grpc::ByteBuffer& buffer, grpc::ByteBuffer& out, const ServingState& state) {
  tessera::v1::TokenizeRequest request;
  TESSERA_RETURN_IF_ERROR(parse_request(buffer, request));
  TESSERA_ASSIGN_OR_RETURN(ServedModel* model, loaded_model(state));
  TESSERA_RETURN_IF_ERROR(validate_model(request.model(), model->limits()));
  std::vector<int32_t> ids;
  switch (request.input_case()) {
    case tessera::v1::TokenizeRequest::kText: {
      absl::StatusOr<std::vector<int32_t>> r =
          model->tokenizer().encode(request.text(), request.add_special_tokens());
      if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("text: ", std::string(r.status().message())));
      ids = *std::move(r);
      break;
    }
    case tessera::v1::TokenizeRequest::kChat: {
      TESSERA_ASSIGN_OR_RETURN(std::vector<ChatMessage> chat,
                               validate_chat(request.chat(), model->limits(), "chat"));
      TESSERA_ASSIGN_OR_RETURN(nlohmann::ordered_json tools, validate_chat_tools(request.chat()));
      absl::StatusOr<std::vector<int32_t>> r = model->files().encode_chat(chat, tools);
      if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("chat: ", std::string(r.status().message())));
      ids = *std::move(r);
      break;
    }
    case tessera::v1::TokenizeRequest::INPUT_NOT_SET:
      return absl::InvalidArgumentError("input: set one of text or chat");
  }
  tessera::v1::TokenizeResponse response;
  response.mutable_token_ids()->Add(ids.begin(), ids.end());
  for (int32_t id : ids) response.add_tokens(model->tokenizer().token_bytes(id));
  return serialize_response(response, out);
}

// The model's info as `admin` may see it.
tessera::v1::ModelInfo info_for(const ServedModel& model, bool admin) {
  return admin ? model.info() : without_host_details(model.info());
}

absl::Status model_info(const grpc::ByteBuffer& buffer, grpc::ByteBuffer& out,
                        const ServingState& state, bool admin) {
  tessera::v1::GetModelInfoRequest request;
  TESSERA_RETURN_IF_ERROR(parse_request(buffer, request));
  TESSERA_ASSIGN_OR_RETURN(ServedModel* model, loaded_model(state));
  TESSERA_RETURN_IF_ERROR(validate_model(request.model(), model->limits()));
  return serialize_response(info_for(*model, admin), out);
}

grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* context, const absl::Status& status,
                                 std::string_view method) {
  if (!status.ok()) log_request(spdlog::level::debug, "", "{}: {}", std::string(method), status.ToString());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(to_grpc_status(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  if (absl::Status s = auth_.authenticate(call_authorization(*context)); !s.ok()) {
    return answer(context, s, "Generate");
  }
  return start_generate(context, request, response, state_, delivery_);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  if (absl::Status s = auth_.authenticate(call_authorization(*context)); !s.ok()) {
    log_request(spdlog::level::debug, "", "GenerateStream: {}", s.ToString());
    return new RefusedStream<grpc::ByteBuffer>(to_grpc_status(s));
  }
  return start_generate_stream(context, request, state_, delivery_);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  absl::Status s = auth_.authenticate(call_authorization(*context));
  if (s.ok()) s = tokenize(*request, *response, state_);
  return answer(context, s, "Tokenize");
}

grpc::ServerUnaryReactor* GenerationService::ListModels(grpc::CallbackServerContext* context,
                                                        const tessera::v1::ListModelsRequest*,
                                                        tessera::v1::ListModelsResponse* response) {
  const std::optional<std::string_view> authorization = call_authorization(*context);
  if (absl::Status s = auth_.authenticate(authorization); !s.ok()) {
    return answer(context, s, "ListModels");
  }
  absl::StatusOr<ServedModel*> model = loaded_model(state_);
  if (model.ok()) *response->add_models() = info_for(**model, auth_.is_admin(authorization));
  return answer(context, model.status(), "ListModels");
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  const std::optional<std::string_view> authorization = call_authorization(*context);
  absl::Status s = auth_.authenticate(authorization);
  if (s.ok()) s = model_info(*request, *response, state_, auth_.is_admin(authorization));
  return answer(context, s, "GetModelInfo");
}

}  // namespace tessera::server
