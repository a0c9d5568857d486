// libFuzzer target: the body of POST /v1/completions or /v1/chat/completions (the first input
// byte picks the endpoint: even = completions, odd = chat; the rest is the body) through
// parse_openai_request, each resulting GenerateRequest through request_validation as the OpenAI
// routes submit it, and every refusal through openai_error_from_status, whose body must be JSON.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/http/openai_errors.h"
#include "server/http/openai_request.h"
#include "server/request_validation.h"

namespace {

using namespace tessera::server;

// The default model as tesserad serves it (no tokenizer needed before submit_generate's
// tokenizing, which fuzz_grpc_request covers).
const ModelLimits& limits() {
  static const ModelLimits l{"SmolLM2-135M-Instruct.Q4_1", 49152, 8192, true};
  return l;
}

void answer(const absl::Status& status) {
  const HttpResponse r = openai_error_from_status(status);
  if (r.status < 400 || !nlohmann::json::accept(r.body)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const OpenAiEndpoint endpoint =
      data[0] % 2 == 0 ? OpenAiEndpoint::kCompletions : OpenAiEndpoint::kChat;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<OpenAiRequest> r = parse_openai_request(endpoint, body);
  if (!r.ok()) {
    answer(r.status());
    return 0;
  }
  if (r->prompts.empty() || r->n < 1 || r->n > kMaxChoices) std::abort();
  for (const tessera::v1::GenerateRequest& prompt : r->prompts) {
    absl::StatusOr<ValidatedRequest> v = validate_generate_request(prompt, limits());
    if (!v.ok()) answer(v.status());
  }
  return 0;
}
