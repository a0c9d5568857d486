// libFuzzer target: a Generate call's request as it arrives over gRPC -- raw bytes through
// proto_codec's parse_request (and its invalid-UTF-8 field finder), request_validation, then
// what submit_generate does before the engine: the default model's tokenizer for a prompt, its
// chat template (render_chat_prompt, control tokens kept plain inside contents) for chat input,
// and fit_to_context. The limits are the default model's as tesserad serves it.
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "runtime/tokenizer/chat_prompt.h"
#include "server/proto_codec.h"
#include "server/request_validation.h"
#include "tessera/v1/tessera.pb.h"
#include "tests/fuzz/fuzz_default_model.h"

namespace {

using namespace tessera;
using namespace tessera::server;

const ModelLimits& limits() {
  static const ModelLimits l = [] {
    ModelLimits m;
    m.model_id = "SmolLM2-135M-Instruct.Q4_1";
    m.vocab_size = fuzz::default_model().tokenizer->vocab_size();
    m.max_model_len = 8192;
    m.has_chat_template = true;
    return m;
  }();
  return l;
}

// What submit_generate makes of a validated request before submitting it.
absl::Status to_prompt(ValidatedRequest& v) {
  const fuzz::DefaultModel& model = fuzz::default_model();
  std::vector<int32_t> prompt;
  switch (v.input) {
    case InputKind::kPrompt: {
      absl::StatusOr<std::vector<int32_t>> ids = model.tokenizer->encode(v.prompt);
      if (!ids.ok()) return ids.status();
      prompt = *std::move(ids);
      break;
    }
    case InputKind::kChat: {
      ChatTemplateOptions options = model.chat_options;
      options.tools = v.chat_tools;
      absl::StatusOr<ChatPrompt> p =
          render_chat_prompt(*model.chat_template, v.chat, options, *model.tokenizer);
      if (!p.ok()) return p.status();
      absl::StatusOr<std::vector<int32_t>> ids = model.tokenizer->encode(
          p->text, /*add_special=*/false, /*parse_special=*/true, p->contents);
      if (!ids.ok()) return ids.status();
      prompt = *std::move(ids);
      break;
    }
    case InputKind::kTokenIds:
      prompt = v.token_ids;
      break;
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= limits().vocab_size) std::abort();  // the engine would index with it
  }
  absl::Status fits =
      fit_to_context(static_cast<int64_t>(prompt.size()), limits(), v.max_tokens_given, v.stop);
  if (!fits.ok()) return fits;
  // What the engine relies on: room for every token it may generate, and at least one.
  if (v.stop.max_tokens < 1 || v.stop.min_tokens > v.stop.max_tokens ||
      static_cast<int64_t>(prompt.size()) + v.stop.max_tokens > limits().max_model_len) {
    std::abort();
  }
  return absl::OkStatus();
}

// Loads the model and silences protobuf's log line for each invalid-UTF-8 input (what the
// target checks is parse_request's status, not the log).
bool set_up() {
  static const bool done = [] {
    google::protobuf::SetLogHandler(nullptr);
    (void)fuzz::default_model();
    return true;
  }();
  return done;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return set_up() ? 0 : 1;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  set_up();  // the corpus driver has no LLVMFuzzerInitialize call
  const std::string wire(reinterpret_cast<const char*>(data), size);
  (void)find_invalid_utf8_field(wire, *tessera::v1::GenerateRequest::descriptor());
  grpc::Slice slice(wire);
  grpc::ByteBuffer buffer(&slice, 1);
  tessera::v1::GenerateRequest request;
  if (!parse_request(buffer, request).ok()) return 0;
  absl::StatusOr<ValidatedRequest> v = validate_generate_request(request, limits());
  if (!v.ok()) return 0;
  // Validation's promises to what comes after it.
  if (v->stop.max_tokens < 1 || (v->input == InputKind::kPrompt && v->prompt.empty())) std::abort();
  (void)to_prompt(*v);
  return 0;
}
