#include "server/request_validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "server/json_nesting.h"

namespace tessera::server {
namespace {

ModelLimits limits() {
  ModelLimits l;
  l.model_id = "tiny";
  l.vocab_size = 1000;
  l.max_model_len = 128;
  l.has_chat_template = true;
  return l;
}

tessera::v1::GenerateRequest valid() {
  tessera::v1::GenerateRequest r;
  r.set_prompt("hello");
  return r;
}

struct Case {
  const char* name;
  std::function<void(tessera::v1::GenerateRequest&)> edit;
  absl::StatusCode code;
  const char* field;
};

// logit_bias arrives sorted by token id (a proto map has no order), tools parsed.
TEST(RequestValidation, LogitBiasAndToolsReachTheRequest) {
  tessera::v1::GenerateRequest r;
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  r.mutable_chat()->set_tools_json(R"([{"type": "function", "function": {"name": "f"}}])");
  (*r.mutable_sampling()->mutable_logit_bias())[7] = -100;
  (*r.mutable_sampling()->mutable_logit_bias())[3] = 5.5f;
  auto v = validate_generate_request(r, limits());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, 5.5f}, {7, -100.0f}}));
  ASSERT_TRUE(v->chat_tools.is_array());
  EXPECT_EQ(v->chat_tools[0]["function"]["name"], "f");
}

TEST(RequestValidation, ToolsNestedUpToTheLimitAreAccepted) {
  tessera::v1::GenerateRequest r;
  r.mutable_chat()->add_messages()->set_role("user");
  r.mutable_chat()->set_tools_json(std::string(kMaxJsonNesting, '[') +
                                   std::string(kMaxJsonNesting, ']'));
  auto v = validate_generate_request(r, limits());
  EXPECT_TRUE(v.ok()) << v.status();
}

TEST(RequestValidation, TableOfBadRequests) {
  using C = absl::StatusCode;
  const std::vector<Case> cases = {
      {"empty prompt", [](auto& r) { r.set_prompt(""); }, C::kInvalidArgument, "prompt: must not be empty"},
      {"bad utf8", [](auto& r) { r.set_prompt("a\x80"); }, C::kInvalidArgument, "prompt: invalid UTF-8"},
      {"no input", [](auto& r) { r.clear_input(); }, C::kInvalidArgument, "input:"},
      {"empty chat", [](auto& r) { (void)r.mutable_chat(); }, C::kInvalidArgument, "chat.messages:"},
      {"bad role", [](auto& r) { r.mutable_chat()->add_messages()->set_role("x"); }, C::kInvalidArgument,
       "chat.messages[0].role"},
      {"empty ids", [](auto& r) { (void)r.mutable_token_ids(); }, C::kInvalidArgument, "token_ids.ids:"},
      {"id 1000", [](auto& r) { r.mutable_token_ids()->add_ids(1000); }, C::kInvalidArgument, "token_ids.ids[0]"},
      {"128 ids", [](auto& r) { for (int i = 0; i < 128; ++i) r.mutable_token_ids()->add_ids(1); },
       C::kOutOfRange, "token_ids.ids"},
      {"temperature nan", [](auto& r) { r.mutable_sampling()->set_temperature(std::nanf("")); },
       C::kInvalidArgument, "sampling.temperature: NaN"},
      {"temperature -1", [](auto& r) { r.mutable_sampling()->set_temperature(-1); }, C::kInvalidArgument,
       "sampling.temperature"},
      {"top_k 1001", [](auto& r) { r.mutable_sampling()->set_top_k(1001); }, C::kInvalidArgument, "sampling.top_k"},
      {"top_p 0", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, C::kInvalidArgument, "sampling.top_p"},
      {"top_p nan", [](auto& r) { r.mutable_sampling()->set_top_p(std::nanf("")); }, C::kInvalidArgument,
       "sampling.top_p"},
      {"min_p -0.1", [](auto& r) { r.mutable_sampling()->set_min_p(-0.1f); }, C::kInvalidArgument, "sampling.min_p"},
      {"rep 11", [](auto& r) { r.mutable_sampling()->set_repetition_penalty(11); }, C::kInvalidArgument,
       "sampling.repetition_penalty"},
      {"freq nan", [](auto& r) { r.mutable_sampling()->set_frequency_penalty(std::nanf("")); },
       C::kInvalidArgument, "sampling.frequency_penalty"},
      {"presence 2.1", [](auto& r) { r.mutable_sampling()->set_presence_penalty(2.1f); }, C::kInvalidArgument,
       "sampling.presence_penalty"},
      {"max_tokens 0", [](auto& r) { r.mutable_stopping()->set_max_tokens(0); }, C::kInvalidArgument,
       "stopping.max_tokens"},
      {"max_tokens 128", [](auto& r) { r.mutable_stopping()->set_max_tokens(128); }, C::kOutOfRange,
       "stopping.max_tokens"},
      {"min_tokens 300", [](auto& r) { r.mutable_stopping()->set_min_tokens(300); }, C::kInvalidArgument,
       "stopping.min_tokens"},
      {"stop empty", [](auto& r) { r.mutable_stopping()->add_stop(""); }, C::kInvalidArgument, "stopping.stop[0]"},
      {"stop ids 65", [](auto& r) { for (int i = 0; i < 65; ++i) r.mutable_stopping()->add_stop_token_ids(1); },
       C::kInvalidArgument, "stopping.stop_token_ids"},
      {"stop id -3", [](auto& r) { r.mutable_stopping()->add_stop_token_ids(-3); }, C::kInvalidArgument,
       "stopping.stop_token_ids[0]"},
      {"top_logprobs -1", [](auto& r) { r.set_top_logprobs(-1); }, C::kInvalidArgument, "top_logprobs"},
      {"request_id 129", [](auto& r) { r.set_request_id(std::string(129, 'x')); }, C::kInvalidArgument,
       "request_id"},
      {"model", [](auto& r) { r.set_model("big"); }, C::kNotFound, "model: \"big\""},
      {"logit_bias 101", [](auto& r) { (*r.mutable_sampling()->mutable_logit_bias())[5] = 101; },
       C::kInvalidArgument, "sampling.logit_bias[5]"},
      {"logit_bias id 1000", [](auto& r) { (*r.mutable_sampling()->mutable_logit_bias())[1000] = 1; },
       C::kInvalidArgument, "sampling.logit_bias: token id 1000"},
      {"tools not an array", [](auto& r) {
         auto* m = r.mutable_chat()->add_messages();
         m->set_role("user");
         m->set_content("hi");
         r.mutable_chat()->set_tools_json("{\"type\": \"function\"}");
       }, C::kInvalidArgument, "chat.tools_json: must be a JSON array"},
      // Copying such a value recursed once per level: 200k levels overflowed the stack.
      {"tools nested too deeply", [](auto& r) {
         r.mutable_chat()->add_messages()->set_role("user");
         r.mutable_chat()->set_tools_json(std::string(129, '[') + std::string(129, ']'));
       }, C::kInvalidArgument, "chat.tools_json: nests deeper than 128 levels"},
      {"tools nested far too deeply", [](auto& r) {
         r.mutable_chat()->add_messages()->set_role("user");
         r.mutable_chat()->set_tools_json(std::string(200000, '[') + std::string(200000, ']'));
       }, C::kInvalidArgument, "chat.tools_json: nests deeper than 128 levels"},
  };
  for (const Case& c : cases) {
    tessera::v1::GenerateRequest r = valid();
    c.edit(r);
    auto v = validate_generate_request(r, limits());
    ASSERT_FALSE(v.ok()) << c.name;
    EXPECT_EQ(v.status().code(), c.code) << c.name << ": " << v.status();
    EXPECT_NE(std::string(v.status().message()).find(c.field), std::string::npos)
        << c.name << ": " << v.status() << " does not name " << c.field;
  }
}

TEST(RequestValidation, ChatWithoutATemplateIsAFailedPrecondition) {
  ModelLimits l = limits();
  l.has_chat_template = false;
  tessera::v1::GenerateRequest r;
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  auto v = validate_generate_request(r, l);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RequestValidation, ValidRequestBecomesRuntimeFields) {
  tessera::v1::GenerateRequest r;
  r.set_model("tiny");
  r.set_request_id("abc");
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("system");
  m->set_content("be brief");
  auto* s = r.mutable_sampling();
  s->set_temperature(0.5f);
  s->set_top_k(40);
  s->set_top_p(0.9f);
  s->set_min_p(0.05f);
  s->set_repetition_penalty(1.1f);
  s->set_frequency_penalty(-2);
  s->set_presence_penalty(2);
  s->set_seed(7);
  auto* st = r.mutable_stopping();
  st->set_max_tokens(20);
  st->set_min_tokens(20);
  st->add_stop("\n\n");
  st->add_stop_token_ids(999);
  st->set_ignore_eos(true);
  r.set_top_logprobs(20);
  auto v = validate_generate_request(r, limits());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->request_id, "abc");
  EXPECT_EQ(v->input, InputKind::kChat);
  ASSERT_EQ(v->chat.size(), 1u);
  EXPECT_EQ(v->chat[0].role, "system");
  EXPECT_FLOAT_EQ(v->sampling.temperature, 0.5f);
  EXPECT_EQ(v->sampling.top_k, 40);
  EXPECT_FLOAT_EQ(v->sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(v->sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(v->sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(v->sampling.has_seed);
  EXPECT_EQ(v->sampling.seed, 7u);
  EXPECT_TRUE(v->sampling.logprobs);
  EXPECT_EQ(v->sampling.top_logprobs, 20);
  EXPECT_EQ(v->stop.max_tokens, 20);
  EXPECT_EQ(v->stop.min_tokens, 20);
  EXPECT_EQ(v->stop.stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(v->stop.stop_token_ids, std::vector<int32_t>{999});
  EXPECT_TRUE(v->stop.ignore_eos);
  EXPECT_TRUE(v->max_tokens_given);
}

TEST(RequestValidation, UnsetFieldsTakeTheDocumentedDefaults) {
  auto v = validate_generate_request(valid(), limits());
  ASSERT_TRUE(v.ok());
  EXPECT_FLOAT_EQ(v->sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(v->sampling.top_p, 1.0f);
  EXPECT_FLOAT_EQ(v->sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(v->sampling.has_seed);
  EXPECT_FALSE(v->sampling.logprobs);
  EXPECT_EQ(v->stop.max_tokens, kDefaultMaxTokens);
  EXPECT_FALSE(v->max_tokens_given);
  tessera::v1::GenerateRequest greedy = valid();
  greedy.mutable_sampling()->set_temperature(0);  // explicitly 0 is greedy, not the default
  EXPECT_FLOAT_EQ(validate_generate_request(greedy, limits())->sampling.temperature, 0.0f);
}

TEST(RequestValidation, FitToContext) {
  const ModelLimits l = limits();  // 128 tokens
  StopParams stop;
  stop.max_tokens = 256;  // the default, not given
  ASSERT_TRUE(fit_to_context(100, l, /*given=*/false, stop).ok());
  EXPECT_EQ(stop.max_tokens, 28);
  stop.max_tokens = 29;
  const absl::Status explicit_too_many = fit_to_context(100, l, /*given=*/true, stop);
  EXPECT_EQ(explicit_too_many.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(std::string(explicit_too_many.message()).find("stopping.max_tokens"), std::string::npos);
  EXPECT_NE(std::string(explicit_too_many.message()).find("28"), std::string::npos) << explicit_too_many;
  stop.max_tokens = 28;
  EXPECT_TRUE(fit_to_context(100, l, true, stop).ok());
  const absl::Status full = fit_to_context(128, l, false, stop);
  EXPECT_EQ(full.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(std::string(full.message()).find("prompt: 128 tokens"), std::string::npos) << full;
}

}  // namespace
}  // namespace tessera::server
