#include "server/http/openai_request.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/echoed_text.h"
#include "server/json_nesting.h"

namespace tessera::server {

namespace {

using nlohmann::json;
using tessera::v1::GenerateRequest;

absl::Status bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status not_supported(const std::string& field, const std::string& what = "") {
  return bad(field, absl::StrCat("is not supported by tessera yet", what.empty() ? "" : "; ", what));
}

const char* json_type(const json& v) { return v.type_name(); }

absl::StatusOr<double> number(const json& v, const std::string& field) {
  if (!v.is_number()) return bad(field, absl::StrCat("must be a number, not ", json_type(v)));
  return v.get<double>();
}

absl::StatusOr<int64_t> integer(const json& v, const std::string& field) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e15) return static_cast<int64_t>(d);
  }
  return bad(field, absl::StrCat("must be an integer, not ", json_type(v)));
}

absl::StatusOr<int32_t> int32(const json& v, const std::string& field) {
  absl::StatusOr<int64_t> i = integer(v, field);
  if (!i.ok()) return i.status();
  if (*i < INT32_MIN || *i > INT32_MAX) return bad(field, absl::StrCat(*i, " is out of range"));
  return static_cast<int32_t>(*i);
}

absl::StatusOr<bool> boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) return bad(field, absl::StrCat("must be true or false, not ", json_type(v)));
  return v.get<bool>();
}

absl::StatusOr<std::string> string(const json& v, const std::string& field) {
  if (!v.is_string()) return bad(field, absl::StrCat("must be a string, not ", json_type(v)));
  return v.get<std::string>();
}

// Token ids: a JSON array of integers.
absl::StatusOr<std::vector<int32_t>> token_ids(const json& v, const std::string& field) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<int32_t> id = int32(v[i], absl::StrCat(field, "[", i, "]"));
    if (!id.ok()) return id.status();
    ids.push_back(*id);
  }
  return ids;
}

// prompt: a string, a list of strings, a list of token ids, or a list of lists of token ids.
absl::Status read_prompts(const json& v, const GenerateRequest& common, OpenAiRequest& out) {
  const auto add = [&]() -> GenerateRequest& { return out.prompts.emplace_back(common); };
  if (v.is_string()) {
    add().set_prompt(v.get<std::string>());
    return absl::OkStatus();
  }
  if (!v.is_array() || v.empty()) {
    return bad("prompt", "must be a string, a list of strings, or a list of token ids (non-empty)");
  }
  if (v[0].is_number()) {
    absl::StatusOr<std::vector<int32_t>> ids = token_ids(v, "prompt");
    if (!ids.ok()) return ids.status();
    add().mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
    return absl::OkStatus();
  }
  if (v.size() > kMaxPrompts) return bad("prompt", absl::StrCat(v.size(), " prompts; at most ", kMaxPrompts));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("prompt[", i, "]");
    if (v[i].is_string()) {
      add().set_prompt(v[i].get<std::string>());
    } else if (v[i].is_array() && !v[i].empty()) {
      absl::StatusOr<std::vector<int32_t>> ids = token_ids(v[i], field);
      if (!ids.ok()) return ids.status();
      add().mutable_token_ids()->mutable_ids()->Add(ids->begin(), ids->end());
    } else {
      return bad(field, "must be a string or a non-empty list of token ids");
    }
  }
  return absl::OkStatus();
}

// A message's content: a string, or a list of text parts ({"type": "text", "text": ...}).
absl::StatusOr<std::string> message_content(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::string();
  if (!v.is_array()) return bad(field, "must be a string or a list of text parts");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = absl::StrCat(field, "[", i, "]");
    if (!v[i].is_object()) return bad(part, "must be an object");
    const auto type = v[i].find("type");
    if (type == v[i].end() || *type != "text") {
      return not_supported(absl::StrCat(part, ".type"), "only \"text\" parts are");
    }
    const auto t = v[i].find("text");
    if (t == v[i].end()) return bad(absl::StrCat(part, ".text"), "is required");
    absl::StatusOr<std::string> s = string(*t, absl::StrCat(part, ".text"));
    if (!s.ok()) return s.status();
    text += *s;
  }
  return text;
}

absl::Status read_messages(const json& v, GenerateRequest& out) {
  if (!v.is_array()) return bad("messages", "must be a list of messages");
  tessera::v1::ChatInput& chat = *out.mutable_chat();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!v[i].is_object()) return bad(field, "must be an object");
    tessera::v1::ChatMessage& m = *chat.add_messages();
    for (const auto& [key, value] : v[i].items()) {
      const std::string at = absl::StrCat(field, ".", key);
      if (key == "role") {
        absl::StatusOr<std::string> role = string(value, at);
        if (!role.ok()) return role.status();
        m.set_role(*role);
      } else if (key == "content") {
        absl::StatusOr<std::string> content = message_content(value, at);
        if (!content.ok()) return content.status();
        m.set_content(*content);
      } else if (key == "name" || key == "tool_call_id") {
        if (!value.is_string()) return bad(at, "must be a string");
      } else if (key == "tool_calls") {
        if (!value.is_null() && !value.empty()) return not_supported(at);
      } else {
        return bad(echoed_text(at), "is not a field of a chat message");
      }
    }
    if (m.role().empty()) return bad(absl::StrCat(field, ".role"), "is required");
  }
  return absl::OkStatus();
}

absl::Status read_stop(const json& v, tessera::v1::StoppingParams& out) {
  if (v.is_null()) return absl::OkStatus();
  if (v.is_string()) {
    out.add_stop(v.get<std::string>());
    return absl::OkStatus();
  }
  if (!v.is_array()) return bad("stop", "must be a string or a list of strings");
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<std::string> s = string(v[i], absl::StrCat("stop[", i, "]"));
    if (!s.ok()) return s.status();
    out.add_stop(*s);
  }
  return absl::OkStatus();
}

// One body field (not prompt/messages): into the common request or the OpenAI options.
absl::Status read_field(OpenAiEndpoint endpoint, const std::string& key, const json& v,
                        GenerateRequest& common, OpenAiRequest& out) {
  const bool chat = endpoint == OpenAiEndpoint::kChat;
  tessera::v1::SamplingParams& sampling = *common.mutable_sampling();
  tessera::v1::StoppingParams& stopping = *common.mutable_stopping();
  // null means "not given" for every optional field.
  if (v.is_null()) return absl::OkStatus();
  if (key == "model") {
    absl::StatusOr<std::string> s = string(v, key);
    if (!s.ok()) return s.status();
    common.set_model(*s);
  } else if (key == "max_tokens" || (chat && key == "max_completion_tokens")) {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    stopping.set_max_tokens(*i);
  } else if (key == "temperature" || key == "top_p" || key == "presence_penalty" ||
             key == "frequency_penalty" || key == "min_p" || key == "repetition_penalty") {
    absl::StatusOr<double> d = number(v, key);
    if (!d.ok()) return d.status();
    const float f = static_cast<float>(*d);
    if (key == "temperature") sampling.set_temperature(f);
    else if (key == "top_p") sampling.set_top_p(f);
    else if (key == "presence_penalty") sampling.set_presence_penalty(f);
    else if (key == "frequency_penalty") sampling.set_frequency_penalty(f);
    else if (key == "min_p") sampling.set_min_p(f);
    else sampling.set_repetition_penalty(f);
  } else if (key == "top_k") {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    sampling.set_top_k(*i == -1 ? 0 : *i);  // vLLM: -1 = off
  } else if (key == "seed") {
    absl::StatusOr<int64_t> i = integer(v, key);
    if (!i.ok()) return i.status();
    sampling.set_seed(static_cast<uint64_t>(*i));
  } else if (key == "n") {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    if (*i < 1 || *i > kMaxChoices) return bad(key, absl::StrCat(*i, " is outside [1, ", kMaxChoices, "]"));
    out.n = *i;
  } else if (key == "best_of") {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    if (*i != 1) return not_supported(key, "only best_of = 1 is");
  } else if (key == "stop") {
    return read_stop(v, stopping);
  } else if (key == "stop_token_ids") {
    if (!v.is_array()) return bad(key, "must be a list of token ids");
    absl::StatusOr<std::vector<int32_t>> ids = token_ids(v, key);
    if (!ids.ok()) return ids.status();
    stopping.mutable_stop_token_ids()->Add(ids->begin(), ids->end());
  } else if (key == "min_tokens") {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    stopping.set_min_tokens(*i);
  } else if (key == "ignore_eos") {
    absl::StatusOr<bool> b = boolean(v, key);
    if (!b.ok()) return b.status();
    stopping.set_ignore_eos(*b);
  } else if (key == "stream") {
    absl::StatusOr<bool> b = boolean(v, key);
    if (!b.ok()) return b.status();
    out.stream = *b;
  } else if (key == "stream_options") {
    if (!v.is_object()) return bad(key, "must be an object");
    for (const auto& [option, value] : v.items()) {
      if (option != "include_usage") return bad(echoed_text(absl::StrCat(key, ".", option)), "is not a stream option");
      absl::StatusOr<bool> b = boolean(value, "stream_options.include_usage");
      if (!b.ok()) return b.status();
      out.include_usage = *b;
    }
  } else if (key == "logprobs") {
    if (chat) {
      absl::StatusOr<bool> b = boolean(v, key);
      if (!b.ok()) return b.status();
      common.set_logprobs(*b);
    } else {
      // Completions: the number of alternatives, 0..5.
      absl::StatusOr<int32_t> i = int32(v, key);
      if (!i.ok()) return i.status();
      if (*i < 0 || *i > kMaxCompletionLogprobs) {
        return bad(key, absl::StrCat(*i, " is outside [0, ", kMaxCompletionLogprobs, "]"));
      }
      common.set_logprobs(true);
      common.set_top_logprobs(*i);
    }
  } else if (chat && key == "top_logprobs") {
    absl::StatusOr<int32_t> i = int32(v, key);
    if (!i.ok()) return i.status();
    common.set_top_logprobs(*i);
  } else if (key == "user") {
    if (!v.is_string()) return bad(key, "must be a string");
  } else if (key == "logit_bias") {
    if (!v.is_object()) return bad(key, "must be an object of token id -> bias");
    for (const auto& [id, bias] : v.items()) {
      int32_t token = 0;
      if (!absl::SimpleAtoi(id, &token)) {
        return bad(key, absl::StrCat("key '", id.substr(0, 32), "' is not a token id"));
      }
      absl::StatusOr<double> d = number(bias, absl::StrCat(key, "[", id.substr(0, 32), "]"));
      if (!d.ok()) return d.status();
      (*sampling.mutable_logit_bias())[token] = static_cast<float>(*d);
    }
  } else if (!chat && key == "echo") {
    absl::StatusOr<bool> b = boolean(v, key);
    if (!b.ok()) return b.status();
    if (*b) return not_supported(key);
  } else if (!chat && key == "suffix") {
    return not_supported(key);
  } else if (chat && key == "response_format") {
    // find(), not value(): value("type", "") throws when type is there but not a string.
    const auto type = v.is_object() ? v.find("type") : v.end();
    if (type == v.end() || *type != "text") {
      return not_supported(key, "only {\"type\": \"text\"} is");
    }
  } else if (chat && key == "tools") {
    if (!v.is_array()) return bad(key, "must be a list of tools");
    if (!v.empty()) common.mutable_chat()->set_tools_json(v.dump());
  } else if (chat && key == "functions") {
    if (!v.empty()) return not_supported(key, "the deprecated functions field is not; use tools");
  } else if (chat && (key == "tool_choice" || key == "function_call")) {
    if (v != "none" && v != "auto") return not_supported(key, "only \"none\" and \"auto\" are");
  } else if (chat && key == "parallel_tool_calls") {
    if (!v.is_boolean()) return bad(key, "must be true or false");
  } else {
    return bad(echoed_text(key), "is not a field of this endpoint");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpenAiRequest> parse_openai_request(OpenAiEndpoint endpoint, std::string_view body) {
  json root;
  try {
    root = json::parse(body);
  } catch (const json::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 12: ...", or
    // out_of_range.406 for a number beyond double ("1e309").
    const std::string what = e.what();
    const size_t at = what.find("] ");
    return bad("body", "is not valid JSON: " + (at == std::string::npos ? what : what.substr(at + 2)));
  }
  if (!root.is_object()) return bad("body", "must be a JSON object");
  if (json_nesting(root) > kMaxJsonNesting) {
    return bad("body", absl::StrCat("nests deeper than ", kMaxJsonNesting, " levels"));
  }
  OpenAiRequest out;
  out.endpoint = endpoint;
  GenerateRequest common;
  const char* input_field = endpoint == OpenAiEndpoint::kChat ? "messages" : "prompt";
  for (const auto& [key, value] : root.items()) {
    if (key == input_field) continue;
    if (absl::Status s = read_field(endpoint, key, value, common, out); !s.ok()) return s;
  }
  if (!out.stream && out.include_usage) return bad("stream_options", "is only allowed with stream: true");
  out.logprobs = common.logprobs();
  const auto input = root.find(input_field);
  if (input == root.end()) return bad(input_field, "is required");
  if (endpoint == OpenAiEndpoint::kChat) {
    GenerateRequest& request = out.prompts.emplace_back(common);
    if (absl::Status s = read_messages(*input, request); !s.ok()) return s;
  } else if (absl::Status s = read_prompts(*input, common, out); !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace tessera::server
