#include "server/http/openai_response.h"

#include <utility>

namespace tessera::server {

namespace {

using nlohmann::json;

json byte_values(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

json chat_token(int32_t token, float logprob, const Tokenizer& tokenizer) {
  const std::string text = tokenizer.token_bytes(token);
  return {{"token", text}, {"logprob", logprob}, {"bytes", byte_values(text)}};
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  if (reason == FinishReason::kLength) return "length";
  return reason == FinishReason::kCancelled ? "cancelled" : "stop";
}

json openai_usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json openai_logprobs(OpenAiEndpoint endpoint, const std::vector<SampleResult>& samples,
                     const Tokenizer& tokenizer, int64_t text_offset) {
  if (endpoint == OpenAiEndpoint::kChat) {
    json content = json::array();
    for (const SampleResult& s : samples) {
      json token = chat_token(s.token, s.logprob, tokenizer);
      json top = json::array();
      for (const TokenLogprob& alt : s.top) top.push_back(chat_token(alt.token, alt.logprob, tokenizer));
      token["top_logprobs"] = std::move(top);
      content.push_back(std::move(token));
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const SampleResult& s : samples) {
    const std::string text = tokenizer.token_bytes(s.token);
    tokens.push_back(text);
    token_logprobs.push_back(s.logprob);
    json top = json::object();
    for (const TokenLogprob& alt : s.top) top[tokenizer.token_bytes(alt.token)] = alt.logprob;
    top_logprobs.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

json openai_choice(OpenAiEndpoint endpoint, int index, const std::string& text,
                   const json& logprobs, FinishReason reason) {
  json choice = {{"index", index}, {"logprobs", logprobs},
                 {"finish_reason", openai_finish_reason(reason)}};
  if (endpoint == OpenAiEndpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  return choice;
}

json openai_chunk_choice(OpenAiEndpoint endpoint, int index, const std::string& text,
                         const json& logprobs, const FinishReason* reason, bool role_delta) {
  json choice = {{"index", index}, {"logprobs", logprobs},
                 {"finish_reason", reason ? json(openai_finish_reason(*reason)) : json(nullptr)}};
  if (endpoint == OpenAiEndpoint::kChat) {
    json delta = {{"content", text}};
    if (role_delta) delta["role"] = "assistant";
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  return choice;
}

json openai_response(const OpenAiResponseHead& head, json choices, const json& usage) {
  return {{"id", head.id},
          {"object", head.endpoint == OpenAiEndpoint::kChat ? "chat.completion" : "text_completion"},
          {"created", head.created},
          {"model", head.model},
          {"choices", std::move(choices)},
          {"usage", usage}};
}

json openai_chunk(const OpenAiResponseHead& head, json choices, const json& usage) {
  json chunk = {{"id", head.id},
                {"object", head.endpoint == OpenAiEndpoint::kChat ? "chat.completion.chunk"
                                                                   : "text_completion"},
                {"created", head.created},
                {"model", head.model},
                {"choices", std::move(choices)}};
  if (!usage.is_null()) chunk["usage"] = usage;
  return chunk;
}

std::string to_json_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& data) {
  return "data: " + to_json_text(data) + "\n\n";
}

}  // namespace tessera::server
