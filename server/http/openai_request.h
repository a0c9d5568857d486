// The body of POST /v1/completions and /v1/chat/completions, read into tessera's own request
// (tessera.v1.GenerateRequest, one per prompt) so that the shared request rules
// (server/request_validation.h) check it, exactly as they check gRPC's. This file checks only
// what is OpenAI's own: JSON types, the shape of prompt and messages, n, stream options, and
// fields that tessera cannot honour yet (400 naming them, never silently ignored).
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

enum class OpenAiEndpoint { kCompletions, kChat };

inline constexpr int kMaxChoices = 16;  // n
inline constexpr int kMaxPrompts = 64;  // prompts in one completions request
inline constexpr int kMaxCompletionLogprobs = 5;

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::vector<tessera::v1::GenerateRequest> prompts;  // one per prompt; chat: one
  int n = 1;                                          // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report logprobs in the endpoint's shape
};

// INVALID_ARGUMENT naming the field for a body that is not what the endpoint takes.
absl::StatusOr<OpenAiRequest> parse_openai_request(OpenAiEndpoint endpoint, std::string_view body);

}  // namespace tessera::server
