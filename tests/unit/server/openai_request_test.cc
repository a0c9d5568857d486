// The OpenAI body -> tessera.v1.GenerateRequest translation, and OpenAI error bodies.
#include "server/http/openai_request.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "server/http/openai_errors.h"

namespace tessera::server {
namespace {

using nlohmann::json;

OpenAiRequest parse_ok(OpenAiEndpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = parse_openai_request(endpoint, body);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : OpenAiRequest{};
}

std::string error_of(OpenAiEndpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = parse_openai_request(endpoint, body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(OpenAiRequestTest, CompletionFieldsMapOntoTheGenerateRequest) {
  const OpenAiRequest r = parse_ok(OpenAiEndpoint::kCompletions, R"({
      "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "n": 2, "stop": "x", "seed": 3, "presence_penalty": 0.1, "frequency_penalty": 0.2,
      "logprobs": 2, "user": "u", "top_k": -1, "min_p": 0.05, "repetition_penalty": 1.1,
      "min_tokens": 1, "ignore_eos": true, "stop_token_ids": [5], "stream": true,
      "stream_options": {"include_usage": true}, "logit_bias": {}})");
  ASSERT_EQ(r.prompts.size(), 1u);
  const tessera::v1::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.model(), "m");
  EXPECT_EQ(g.prompt(), "hi");
  EXPECT_EQ(g.stopping().max_tokens(), 7);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 0);
  EXPECT_EQ(g.sampling().seed(), 3u);
  EXPECT_EQ(g.stopping().stop(0), "x");
  EXPECT_EQ(g.stopping().stop_token_ids(0), 5);
  EXPECT_TRUE(g.stopping().ignore_eos());
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 2);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_EQ(parse_ok(OpenAiEndpoint::kCompletions, R"({"prompt": ["a", "b"]})").prompts.size(), 2u);
  const OpenAiRequest ids = parse_ok(OpenAiEndpoint::kCompletions, R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].token_ids().ids_size(), 3);
  EXPECT_EQ(parse_ok(OpenAiEndpoint::kCompletions, R"({"prompt": [[1], [2, 3]]})").prompts.size(), 2u);
  // One prompt of many token ids is not many prompts.
  const json long_ids = {{"prompt", std::vector<int>(kMaxPrompts + 1, 7)}};
  const OpenAiRequest one = parse_ok(OpenAiEndpoint::kCompletions, long_ids.dump());
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].token_ids().ids_size(), kMaxPrompts + 1);
  const json many = {{"prompt", std::vector<std::string>(kMaxPrompts + 1, "a")}};
  EXPECT_EQ(error_of(OpenAiEndpoint::kCompletions, many.dump()).rfind("prompt: ", 0), 0u);
  EXPECT_NE(error_of(OpenAiEndpoint::kCompletions, R"({"prompt": []})").find("prompt"), std::string::npos);
  EXPECT_NE(error_of(OpenAiEndpoint::kCompletions, R"({"prompt": [1, "a"]})").find("prompt[1]"),
            std::string::npos);
  EXPECT_NE(error_of(OpenAiEndpoint::kCompletions, R"({"max_tokens": 3})").find("prompt: is required"),
            std::string::npos);
}

TEST(OpenAiRequestTest, ChatMessagesWithTextParts) {
  const OpenAiRequest r = parse_ok(OpenAiEndpoint::kChat, R"({"messages": [
      {"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null}], "max_completion_tokens": 4, "logprobs": true,
      "top_logprobs": 3})");
  const tessera::v1::ChatInput& chat = r.prompts.at(0).chat();
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(1).content(), "ab");
  EXPECT_EQ(r.prompts[0].stopping().max_tokens(), 4);
  EXPECT_EQ(r.prompts[0].top_logprobs(), 3);
  EXPECT_NE(error_of(OpenAiEndpoint::kChat,
                     R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})")
                .find("messages[0].content[0].type"),
            std::string::npos);
}

TEST(OpenAiRequestTest, LogitBiasAndToolsMapOntoTheGenerateRequest) {
  const OpenAiRequest c = parse_ok(OpenAiEndpoint::kCompletions,
                                   R"({"prompt": "a", "logit_bias": {"5": 10, "17": -100}})");
  ASSERT_EQ(c.prompts.size(), 1u);
  const auto& bias = c.prompts[0].sampling().logit_bias();
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias.at(5), 10.0f);
  EXPECT_EQ(bias.at(17), -100.0f);
  const OpenAiRequest chat = parse_ok(OpenAiEndpoint::kChat, R"({
      "messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "get_weather"}}]})");
  ASSERT_EQ(chat.prompts.size(), 1u);
  EXPECT_EQ(json::parse(chat.prompts[0].chat().tools_json())[0]["function"]["name"], "get_weather");
  EXPECT_EQ(chat.prompts[0].chat().messages_size(), 1);
}

TEST(OpenAiRequestTest, WhatTesseraCannotHonourIsNamed) {
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"messages": [], "response_format": {"type": "json_schema"}})", "response_format"},
           {R"({"messages": [], "tools": {"type": "function"}})", "tools"},
           {R"({"prompt": "a", "logit_bias": {"five": 10}})", "logit_bias"},
           {R"({"prompt": "a", "logit_bias": {"5": "ten"}})", "logit_bias"},
           {R"({"prompt": "a", "echo": true})", "echo"},
           {R"({"prompt": "a", "best_of": 3})", "best_of"},
           {R"({"prompt": "a", "frobnicate": 1})", "frobnicate"},
           {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
           {R"({"prompt": "a", "n": 0})", "n"},
           {R"({"prompt": "a", "stream_options": {"include_usage": true}})", "stream_options"},
           {R"({"prompt": "a",)", "body"},
           {R"({"prompt": "a", "temperature": 1e309})", "body"},  // beyond double: not a throw
           {R"({"messages": [], "response_format": {"type": 1}})", "response_format"},
           {"[1]", "body"}}) {
    const OpenAiEndpoint endpoint =
        body.find("messages") != std::string::npos ? OpenAiEndpoint::kChat : OpenAiEndpoint::kCompletions;
    const std::string message = error_of(endpoint, body);
    EXPECT_EQ(message.rfind(field, 0), 0u) << body << " -> " << message;
  }
}

// Dumping tools (for the proto's tools_json) recursed once per level: a 1 MiB body of nested
// arrays overflowed the io thread's stack.
TEST(OpenAiRequestTest, DeeplyNestedBodiesAreRefused) {
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  for (const std::string& body :
       {R"({"messages": [{"role": "user", "content": "hi"}], "tools": )" + deep + "}",
        R"({"prompt": "a", "stop": )" + deep + "}"}) {
    const OpenAiEndpoint endpoint =
        body.find("messages") != std::string::npos ? OpenAiEndpoint::kChat : OpenAiEndpoint::kCompletions;
    EXPECT_EQ(error_of(endpoint, body), "body: nests deeper than 128 levels");
  }
  const std::string fits = std::string(127, '[') + std::string(127, ']');
  parse_ok(OpenAiEndpoint::kChat,
           R"({"messages": [{"role": "user", "content": "hi"}], "tools": )" + fits + "}");
}

TEST(OpenAiErrorsTest, ShapeStatusAndRenamedFields) {
  const HttpResponse bad =
      openai_error_from_status(absl::InvalidArgumentError("sampling.temperature: -1 is outside [0, 100]"));
  EXPECT_EQ(bad.status, 400);
  const json body = json::parse(bad.body);
  EXPECT_EQ(body["error"]["message"], "temperature: -1 is outside [0, 100]");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(body["error"]["code"].is_null());
  EXPECT_EQ(openai_error_from_status(absl::NotFoundError("model: \"x\" is not served")).status, 404);
  EXPECT_EQ(json::parse(openai_error_from_status(absl::NotFoundError("model: x")).body)["error"]["code"],
            "model_not_found");
  EXPECT_EQ(openai_error_from_status(absl::ResourceExhaustedError("queue full")).status, 429);
  EXPECT_EQ(openai_error_from_status(absl::UnavailableError("loading")).status, 503);
  EXPECT_EQ(openai_error_from_status(absl::OutOfRangeError("stopping.max_tokens: 5000 ...")).status, 400);
  EXPECT_EQ(to_openai_field_names("stopping.stop[2]: must not be empty"), "stop[2]: must not be empty");
  EXPECT_EQ(to_openai_field_names("chat.messages[0].role: x"), "messages[0].role: x");
  // Invalid UTF-8 quoted in a message does not break the JSON.
  EXPECT_NO_THROW(json::parse(openai_error(400, "body: \xff").body));
}

}  // namespace
}  // namespace tessera::server
