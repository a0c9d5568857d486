// The JSON of OpenAI's responses: a whole completion / chat completion, the chunks of a streamed
// one (server-sent events), usage, and logprobs in each endpoint's shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/request/request.h"
#include "runtime/tokenizer/tokenizer.h"
#include "server/http/openai_request.h"

namespace tessera::server {

// What the response names: id ("cmpl-..." / "chatcmpl-..."), created (Unix seconds), model.
struct OpenAiResponseHead {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;
  int64_t created = 0;
  std::string model;
};

// "stop" for eos and stop strings/ids, "length" for max_tokens, "cancelled" for a request the
// server ended (a drain; not in OpenAI's list, which has no such case).
const char* openai_finish_reason(FinishReason reason);

nlohmann::json openai_usage(int64_t prompt_tokens, int64_t completion_tokens);

// Logprobs of `samples` in the endpoint's shape: completions {tokens, token_logprobs,
// top_logprobs, text_offset} starting at byte `text_offset`; chat {content: [{token, logprob,
// bytes, top_logprobs}]}.
nlohmann::json openai_logprobs(OpenAiEndpoint endpoint, const std::vector<SampleResult>& samples,
                               const Tokenizer& tokenizer, int64_t text_offset);

// One choice of a whole response: {index, text | message, logprobs, finish_reason}.
nlohmann::json openai_choice(OpenAiEndpoint endpoint, int index, const std::string& text,
                             const nlohmann::json& logprobs, FinishReason reason);

// One choice of a streamed chunk: {index, text | delta, logprobs, finish_reason (null until
// the end)}. `role_delta`: chat's first chunk, which carries the role.
nlohmann::json openai_chunk_choice(OpenAiEndpoint endpoint, int index, const std::string& text,
                                   const nlohmann::json& logprobs, const FinishReason* reason,
                                   bool role_delta);

// The whole response object around `choices`.
nlohmann::json openai_response(const OpenAiResponseHead& head, nlohmann::json choices,
                               const nlohmann::json& usage);
// One chunk object ("chat.completion.chunk" / "text_completion") around `choices`; usage
// null is left out.
nlohmann::json openai_chunk(const OpenAiResponseHead& head, nlohmann::json choices,
                            const nlohmann::json& usage);

// "data: <json>\n\n"; invalid UTF-8 (a token's partial bytes) becomes U+FFFD.
std::string sse_event(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// JSON text, invalid UTF-8 replaced.
std::string to_json_text(const nlohmann::json& value);

}  // namespace tessera::server
