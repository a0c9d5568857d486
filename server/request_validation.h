// Turns a GenerateRequest into the runtime's request fields, or an error naming the field and the
// limit: INVALID_ARGUMENT for a value outside what the field allows, OUT_OF_RANGE for lengths
// beyond the model's context, NOT_FOUND for a model this server does not serve,
// FAILED_PRECONDITION for chat input to a model without a chat template. Pure functions: no
// tokenizer, no engine, no I/O. Every limit documented in tessera.proto is checked here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/request/request.h"
#include "runtime/request/sampler.h"
#include "runtime/tokenizer/chat_template.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// The limits of tessera.proto.
inline constexpr size_t kMaxRequestIdBytes = 128;
inline constexpr int kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 256;
inline constexpr int kMaxStopTokenIds = 64;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int32_t kDefaultMaxTokens = 256;
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr float kMaxAbsFrequencyPenalty = 2.0f;
inline constexpr float kMaxAbsLogitBias = 100.0f;   // OpenAI's range
inline constexpr int kMaxLogitBiasEntries = 1024;
inline constexpr size_t kMaxToolsBytes = size_t{1} << 20;

// What validation needs to know about the served model.
struct ModelLimits {
  std::string model_id;
  int64_t vocab_size = 0;
  int32_t max_model_len = 0;  // prompt + max_tokens, tokens
  bool has_chat_template = false;
};

enum class InputKind { kPrompt, kChat, kTokenIds };

struct ValidatedRequest {
  std::string request_id;  // as the client gave it; may be empty
  InputKind input = InputKind::kPrompt;
  std::string prompt;                    // kPrompt: non-empty UTF-8
  std::vector<ChatMessage> chat;         // kChat: at least one message
  nlohmann::ordered_json chat_tools;     // kChat: the template's `tools` (an array), or null
  std::vector<int32_t> token_ids;        // kTokenIds: each in [0, vocab_size)
  SamplingParams sampling;
  StopParams stop;
  bool max_tokens_given = false;  // false: fit_to_context may lower the default
};

// The model field: empty or the served model's id; NOT_FOUND otherwise.
absl::Status validate_model(std::string_view model, const ModelLimits& limits);

// The tools of a chat request: chat.tools_json parsed (a JSON array of at most kMaxToolsBytes),
// or null when empty.
absl::StatusOr<nlohmann::ordered_json> validate_chat_tools(const tessera::v1::ChatInput& chat);

// Chat messages: at least one, known roles, UTF-8 content. `field` prefixes messages.
absl::StatusOr<std::vector<ChatMessage>> validate_chat(const tessera::v1::ChatInput& chat,
                                                       const ModelLimits& limits,
                                                       std::string_view field);

// Everything that can be checked before tokenizing.
absl::StatusOr<ValidatedRequest> validate_generate_request(const tessera::v1::GenerateRequest& request,
                                                           const ModelLimits& limits);

// After tokenizing: the prompt must leave room in the context for max_tokens (OUT_OF_RANGE
// otherwise, naming prompt or stopping.max_tokens). An unset max_tokens is lowered from its
// default to what the context leaves.
absl::Status fit_to_context(int64_t prompt_tokens, const ModelLimits& limits, bool max_tokens_given,
                            StopParams& stop);

}  // namespace tessera::server
