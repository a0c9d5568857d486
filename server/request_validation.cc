#include "server/request_validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/utf8.h"
#include "server/echoed_text.h"
#include "server/json_nesting.h"

namespace tessera::server {

namespace {

using tessera::v1::GenerateRequest;

absl::Status bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", std::string(what)));
}

absl::Status check_utf8(std::string_view field, std::string_view text) {
  absl::Status s = validate_utf8(text);
  if (s.ok()) return s;
  return bad(field, std::string(s.message()));
}

std::string num(float v) {
  if (std::isnan(v)) return "NaN";
  return absl::StrCat(v);
}

// `lo <= v <= hi` (NaN fails).
absl::Status check_closed(std::string_view field, float v, float lo, float hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return bad(field, absl::StrCat(num(v), " is outside [", lo, ", ", hi, "]"));
}

// `lo < v <= hi` (NaN fails).
absl::Status check_half_open(std::string_view field, float v, float lo, float hi) {
  if (v > lo && v <= hi) return absl::OkStatus();
  return bad(field, absl::StrCat(num(v), " is outside (", lo, ", ", hi, "]"));
}

absl::Status check_token_id(std::string_view field, int32_t id, const ModelLimits& limits) {
  if (id >= 0 && id < limits.vocab_size) return absl::OkStatus();
  return bad(field, absl::StrCat("token id ", id, " is outside the vocabulary [0, ", limits.vocab_size, ")"));
}

absl::Status validate_sampling(const tessera::v1::SamplingParams& p, const ModelLimits& limits,
                               SamplingParams& out) {
  if (p.has_temperature()) {
    if (absl::Status s = check_closed("sampling.temperature", p.temperature(), 0, kMaxTemperature); !s.ok()) return s;
    out.temperature = p.temperature();
  }
  if (p.top_k() < 0 || p.top_k() > limits.vocab_size) {
    return bad("sampling.top_k", absl::StrCat(p.top_k(), " is outside [0, vocab_size = ", limits.vocab_size, "]"));
  }
  out.top_k = p.top_k();
  if (p.has_top_p()) {
    if (absl::Status s = check_half_open("sampling.top_p", p.top_p(), 0, 1); !s.ok()) return s;
    out.top_p = p.top_p();
  }
  if (absl::Status s = check_closed("sampling.min_p", p.min_p(), 0, 1); !s.ok()) return s;
  out.min_p = p.min_p();
  if (p.has_repetition_penalty()) {
    if (absl::Status s = check_half_open("sampling.repetition_penalty", p.repetition_penalty(), 0,
                                         kMaxRepetitionPenalty);
        !s.ok()) {
      return s;
    }
    out.repetition_penalty = p.repetition_penalty();
  }
  if (absl::Status s = check_closed("sampling.frequency_penalty", p.frequency_penalty(),
                                    -kMaxAbsFrequencyPenalty, kMaxAbsFrequencyPenalty);
      !s.ok()) {
    return s;
  }
  out.frequency_penalty = p.frequency_penalty();
  if (absl::Status s = check_closed("sampling.presence_penalty", p.presence_penalty(),
                                    -kMaxAbsFrequencyPenalty, kMaxAbsFrequencyPenalty);
      !s.ok()) {
    return s;
  }
  out.presence_penalty = p.presence_penalty();
  if (p.has_seed()) {
    out.seed = p.seed();
    out.has_seed = true;
  }
  if (p.logit_bias_size() > kMaxLogitBiasEntries) {
    return absl::InvalidArgumentError(absl::StrCat("sampling.logit_bias: ", p.logit_bias_size(),
                                                   " entries; at most ", kMaxLogitBiasEntries));
  }
  for (const auto& [token, bias] : p.logit_bias()) {
    if (absl::Status s = check_closed(absl::StrCat("sampling.logit_bias[", token, "]"), bias,
                                      -kMaxAbsLogitBias, kMaxAbsLogitBias);
        !s.ok()) {
      return s;
    }
    if (token < 0 || token >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("sampling.logit_bias: token id ", token,
                                                     " is outside [0, ", limits.vocab_size, ")"));
    }
    out.logit_bias.emplace_back(token, bias);
  }
  std::sort(out.logit_bias.begin(), out.logit_bias.end());  // a map's order is unspecified
  return absl::OkStatus();
}

absl::Status validate_stopping(const tessera::v1::StoppingParams& p, const ModelLimits& limits,
                               StopParams& out, bool& max_tokens_given) {
  // A prompt has at least one token, so max_tokens can be at most the context minus one.
  const int64_t most = static_cast<int64_t>(limits.max_model_len) - 1;
  max_tokens_given = p.has_max_tokens();
  if (p.has_max_tokens()) {
    if (p.max_tokens() < 1) {
      return bad("stopping.max_tokens",
                 absl::StrCat(p.max_tokens(), " is outside [1, context length - prompt tokens]"));
    }
    if (limits.max_model_len > 0 && p.max_tokens() > most) {
      return absl::OutOfRangeError(absl::StrCat(
          "stopping.max_tokens: ", p.max_tokens(), " does not fit the context: prompt + max_tokens "
          "must be at most max_model_len = ", limits.max_model_len, " tokens"));
    }
    out.max_tokens = p.max_tokens();
  } else {
    out.max_tokens = kDefaultMaxTokens;
  }
  if (p.min_tokens() < 0 || p.min_tokens() > out.max_tokens) {
    return bad("stopping.min_tokens",
               absl::StrCat(p.min_tokens(), " is outside [0, max_tokens = ", out.max_tokens, "]"));
  }
  out.min_tokens = p.min_tokens();
  if (p.stop_size() > kMaxStopStrings) {
    return bad("stopping.stop", absl::StrCat(p.stop_size(), " strings given; at most ", kMaxStopStrings));
  }
  out.stop_strings.clear();
  for (int i = 0; i < p.stop_size(); ++i) {
    const std::string field = absl::StrCat("stopping.stop[", i, "]");
    const std::string& stop = p.stop(i);
    if (stop.empty()) return bad(field, "must not be empty");
    if (stop.size() > kMaxStopStringBytes) {
      return bad(field, absl::StrCat(stop.size(), " bytes; at most ", kMaxStopStringBytes));
    }
    if (absl::Status s = check_utf8(field, stop); !s.ok()) return s;
    out.stop_strings.push_back(stop);
  }
  if (p.stop_token_ids_size() > kMaxStopTokenIds) {
    return bad("stopping.stop_token_ids",
               absl::StrCat(p.stop_token_ids_size(), " ids given; at most ", kMaxStopTokenIds));
  }
  out.stop_token_ids.clear();
  for (int i = 0; i < p.stop_token_ids_size(); ++i) {
    if (absl::Status s = check_token_id(absl::StrCat("stopping.stop_token_ids[", i, "]"),
                                        p.stop_token_ids(i), limits);
        !s.ok()) {
      return s;
    }
    out.stop_token_ids.push_back(p.stop_token_ids(i));
  }
  out.ignore_eos = p.ignore_eos();
  return absl::OkStatus();
}

}  // namespace

absl::Status validate_model(std::string_view model, const ModelLimits& limits) {
  if (model.empty() || model == limits.model_id) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model: \"", echoed_text(model),
                                          "\" is not served here; served: \"", limits.model_id, "\""));
}

absl::StatusOr<nlohmann::ordered_json> validate_chat_tools(const tessera::v1::ChatInput& chat) {
  const std::string& text = chat.tools_json();
  if (text.empty()) return nlohmann::ordered_json();
  if (text.size() > kMaxToolsBytes) {
    return bad("chat.tools_json", absl::StrCat(text.size(), " bytes; at most ", kMaxToolsBytes));
  }
  nlohmann::ordered_json tools = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (tools.is_discarded() || !tools.is_array()) return bad("chat.tools_json", "must be a JSON array");
  if (json_nesting(tools) > kMaxJsonNesting) {
    return bad("chat.tools_json", absl::StrCat("nests deeper than ", kMaxJsonNesting, " levels"));
  }
  return tools;
}

absl::StatusOr<std::vector<ChatMessage>> validate_chat(const tessera::v1::ChatInput& chat,
                                                       const ModelLimits& limits,
                                                       std::string_view field) {
  if (chat.messages_size() == 0) {
    return bad(absl::StrCat(std::string(field), ".messages"), "at least one message is required");
  }
  if (!limits.has_chat_template) {
    return absl::FailedPreconditionError(absl::StrCat(
        std::string(field), ": model \"", limits.model_id,
        "\" has no chat template; send a prompt or token ids instead"));
  }
  std::vector<ChatMessage> out;
  out.reserve(chat.messages_size());
  for (int i = 0; i < chat.messages_size(); ++i) {
    const tessera::v1::ChatMessage& m = chat.messages(i);
    const std::string at = absl::StrCat(std::string(field), ".messages[", i, "]");
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant" && m.role() != "tool") {
      return bad(absl::StrCat(at, ".role"),
                 absl::StrCat("\"", m.role(), "\" is not one of system, user, assistant, tool"));
    }
    if (absl::Status s = check_utf8(absl::StrCat(at, ".content"), m.content()); !s.ok()) return s;
    out.push_back(ChatMessage{m.role(), m.content()});
  }
  return out;
}

absl::StatusOr<ValidatedRequest> validate_generate_request(const GenerateRequest& request,
                                                           const ModelLimits& limits) {
  ValidatedRequest out;
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return bad("request_id", absl::StrCat(request.request_id().size(), " bytes; at most ",
                                          kMaxRequestIdBytes));
  }
  if (absl::Status s = check_utf8("request_id", request.request_id()); !s.ok()) return s;
  out.request_id = request.request_id();
  if (absl::Status s = validate_model(request.model(), limits); !s.ok()) return s;

  switch (request.input_case()) {
    case GenerateRequest::kPrompt:
      out.input = InputKind::kPrompt;
      if (request.prompt().empty()) return bad("prompt", "must not be empty");
      if (absl::Status s = check_utf8("prompt", request.prompt()); !s.ok()) return s;
      out.prompt = request.prompt();
      break;
    case GenerateRequest::kChat: {
      out.input = InputKind::kChat;
      absl::StatusOr<std::vector<ChatMessage>> chat = validate_chat(request.chat(), limits, "chat");
      if (!chat.ok()) return chat.status();
      out.chat = *std::move(chat);
      absl::StatusOr<nlohmann::ordered_json> tools = validate_chat_tools(request.chat());
      if (!tools.ok()) return tools.status();
      out.chat_tools = *std::move(tools);
      break;
    }
    case GenerateRequest::kTokenIds: {
      out.input = InputKind::kTokenIds;
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return bad("token_ids.ids", "at least one token id is required");
      if (limits.max_model_len > 0 && ids.size() >= limits.max_model_len) {
        return absl::OutOfRangeError(absl::StrCat(
            "token_ids.ids: ", ids.size(), " tokens leave no room to generate: prompt + max_tokens "
            "must be at most max_model_len = ", limits.max_model_len, " tokens"));
      }
      for (int i = 0; i < ids.size(); ++i) {
        if (absl::Status s = check_token_id(absl::StrCat("token_ids.ids[", i, "]"), ids[i], limits);
            !s.ok()) {
          return s;
        }
      }
      out.token_ids.assign(ids.begin(), ids.end());
      break;
    }
    case GenerateRequest::INPUT_NOT_SET:
      return bad("input", "set one of prompt, chat or token_ids");
  }

  if (absl::Status s = validate_sampling(request.sampling(), limits, out.sampling); !s.ok()) return s;
  if (absl::Status s = validate_stopping(request.stopping(), limits, out.stop, out.max_tokens_given);
      !s.ok()) {
    return s;
  }
  if (request.top_logprobs() < 0 || request.top_logprobs() > kMaxTopLogprobs) {
    return bad("top_logprobs", absl::StrCat(request.top_logprobs(), " is outside [0, ", kMaxTopLogprobs, "]"));
  }
  out.sampling.top_logprobs = request.top_logprobs();
  out.sampling.logprobs = request.logprobs() || request.top_logprobs() > 0;
  return out;
}

absl::Status fit_to_context(int64_t prompt_tokens, const ModelLimits& limits, bool max_tokens_given,
                            StopParams& stop) {
  if (prompt_tokens <= 0) return bad("prompt", "tokenizes to no tokens");
  if (limits.max_model_len <= 0) return absl::OkStatus();
  const int64_t room = static_cast<int64_t>(limits.max_model_len) - prompt_tokens;
  if (room < 1) {
    return absl::OutOfRangeError(absl::StrCat(
        "prompt: ", prompt_tokens, " tokens leave no room to generate: prompt + max_tokens must be "
        "at most max_model_len = ", limits.max_model_len, " tokens"));
  }
  if (stop.max_tokens <= room) return absl::OkStatus();
  if (!max_tokens_given) {
    stop.max_tokens = static_cast<int32_t>(room);
    stop.min_tokens = std::min(stop.min_tokens, stop.max_tokens);
    return absl::OkStatus();
  }
  return absl::OutOfRangeError(absl::StrCat(
      "stopping.max_tokens: ", stop.max_tokens, " + ", prompt_tokens, " prompt tokens = ",
      stop.max_tokens + prompt_tokens, " exceeds max_model_len = ", limits.max_model_len,
      " tokens; at most ", room, " can be generated for this prompt"));
}

}  // namespace tessera::server
