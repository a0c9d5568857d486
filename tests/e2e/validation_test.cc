// Bad requests, table-driven, through the running server (both Generate and GenerateStream):
// each gets the exact status code and a message naming the field; none disturbs a request that
// is generating at the same time.
#include <cmath>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

struct BadRequest {
  std::string name;
  std::function<void(v1::GenerateRequest&)> make_bad;  // applied to a valid greedy prompt request (setting
                                                        // chat or token_ids replaces the prompt: oneof)
  grpc::StatusCode code;
  std::string field;  // must appear in the message
};

v1::ChatMessage* add_message(v1::GenerateRequest& r, const std::string& role, const std::string& content) {
  v1::ChatMessage* m = r.mutable_chat()->add_messages();
  m->set_role(role);
  m->set_content(content);
  return m;
}

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += " hello";
  return s;
}

const std::vector<BadRequest>& bad_requests() {
  using C = grpc::StatusCode;
  static const std::vector<BadRequest> kTable = {
      {"empty prompt", [](auto& r) { r.set_prompt(""); }, C::INVALID_ARGUMENT, "prompt"},
      {"invalid UTF-8 prompt", [](auto& r) { r.set_prompt("caf\xc3"); }, C::INVALID_ARGUMENT, "prompt: invalid UTF-8"},
      {"invalid UTF-8 chat content",
       [](auto& r) { add_message(r, "user", "ok"); add_message(r, "user", "\xff\xfe"); },
       C::INVALID_ARGUMENT, "chat.messages[1].content"},
      {"unknown role", [](auto& r) { add_message(r, "robot", "hi"); }, C::INVALID_ARGUMENT, "chat.messages[0].role"},
      {"empty chat", [](auto& r) { (void)r.mutable_chat(); }, C::INVALID_ARGUMENT, "chat.messages"},
      {"no input set", [](auto& r) { r.clear_input(); }, C::INVALID_ARGUMENT, "input"},
      {"empty token ids", [](auto& r) { (void)r.mutable_token_ids(); }, C::INVALID_ARGUMENT, "token_ids.ids"},
      {"token id out of vocab",
       [](auto& r) { r.mutable_token_ids()->add_ids(1); r.mutable_token_ids()->add_ids(49152); },
       C::INVALID_ARGUMENT, "token_ids.ids[1]"},
      {"negative token id", [](auto& r) { r.mutable_token_ids()->add_ids(-1); }, C::INVALID_ARGUMENT, "token_ids.ids[0]"},
      {"max_tokens 0", [](auto& r) { r.mutable_stopping()->set_max_tokens(0); }, C::INVALID_ARGUMENT, "stopping.max_tokens"},
      {"max_tokens -5", [](auto& r) { r.mutable_stopping()->set_max_tokens(-5); }, C::INVALID_ARGUMENT, "stopping.max_tokens"},
      {"max_tokens beyond the context", [](auto& r) { r.mutable_stopping()->set_max_tokens(5000); },
       C::OUT_OF_RANGE, "stopping.max_tokens"},
      {"prompt + max_tokens beyond the context", [](auto& r) { r.mutable_stopping()->set_max_tokens(2046); },
       C::OUT_OF_RANGE, "stopping.max_tokens"},
      {"prompt longer than the context", [](auto& r) { r.set_prompt(words(2100)); }, C::OUT_OF_RANGE, "prompt"},
      {"token ids longer than the context",
       [](auto& r) { for (int i = 0; i < 2048; ++i) r.mutable_token_ids()->add_ids(100); },
       C::OUT_OF_RANGE, "token_ids.ids"},
      {"negative temperature", [](auto& r) { r.mutable_sampling()->set_temperature(-0.5f); },
       C::INVALID_ARGUMENT, "sampling.temperature"},
      {"NaN temperature", [](auto& r) { r.mutable_sampling()->set_temperature(std::nanf("")); },
       C::INVALID_ARGUMENT, "sampling.temperature"},
      {"temperature 101", [](auto& r) { r.mutable_sampling()->set_temperature(101); }, C::INVALID_ARGUMENT,
       "sampling.temperature"},
      {"top_p 0", [](auto& r) { r.mutable_sampling()->set_top_p(0); }, C::INVALID_ARGUMENT, "sampling.top_p"},
      {"top_p 1.5", [](auto& r) { r.mutable_sampling()->set_top_p(1.5f); }, C::INVALID_ARGUMENT, "sampling.top_p"},
      {"top_k -1", [](auto& r) { r.mutable_sampling()->set_top_k(-1); }, C::INVALID_ARGUMENT, "sampling.top_k"},
      {"top_k beyond the vocab", [](auto& r) { r.mutable_sampling()->set_top_k(50000); }, C::INVALID_ARGUMENT,
       "sampling.top_k"},
      {"min_p 1.5", [](auto& r) { r.mutable_sampling()->set_min_p(1.5f); }, C::INVALID_ARGUMENT, "sampling.min_p"},
      {"repetition_penalty 0", [](auto& r) { r.mutable_sampling()->set_repetition_penalty(0); },
       C::INVALID_ARGUMENT, "sampling.repetition_penalty"},
      {"frequency_penalty 3", [](auto& r) { r.mutable_sampling()->set_frequency_penalty(3); },
       C::INVALID_ARGUMENT, "sampling.frequency_penalty"},
      {"presence_penalty -2.5", [](auto& r) { r.mutable_sampling()->set_presence_penalty(-2.5f); },
       C::INVALID_ARGUMENT, "sampling.presence_penalty"},
      {"top_logprobs 21", [](auto& r) { r.set_top_logprobs(21); }, C::INVALID_ARGUMENT, "top_logprobs"},
      {"empty stop string", [](auto& r) { r.mutable_stopping()->add_stop(""); }, C::INVALID_ARGUMENT,
       "stopping.stop[0]"},
      {"17 stop strings",
       [](auto& r) { for (int i = 0; i < 17; ++i) r.mutable_stopping()->add_stop(absl::StrCat("s", i)); },
       C::INVALID_ARGUMENT, "stopping.stop"},
      {"stop string of 257 bytes", [](auto& r) { r.mutable_stopping()->add_stop(std::string(257, 'x')); },
       C::INVALID_ARGUMENT, "stopping.stop[0]"},
      {"invalid UTF-8 stop string",
       [](auto& r) { r.mutable_stopping()->add_stop("ok"); r.mutable_stopping()->add_stop("\xe2\x82"); },
       C::INVALID_ARGUMENT, "stopping.stop[1]"},
      {"stop token id out of vocab", [](auto& r) { r.mutable_stopping()->add_stop_token_ids(1 << 20); },
       C::INVALID_ARGUMENT, "stopping.stop_token_ids[0]"},
      {"65 stop token ids",
       [](auto& r) { for (int i = 0; i < 65; ++i) r.mutable_stopping()->add_stop_token_ids(i); },
       C::INVALID_ARGUMENT, "stopping.stop_token_ids"},
      {"min_tokens > max_tokens",
       [](auto& r) { r.mutable_stopping()->set_max_tokens(4); r.mutable_stopping()->set_min_tokens(5); },
       C::INVALID_ARGUMENT, "stopping.min_tokens"},
      {"negative min_tokens", [](auto& r) { r.mutable_stopping()->set_min_tokens(-1); }, C::INVALID_ARGUMENT,
       "stopping.min_tokens"},
      {"request_id of 129 bytes", [](auto& r) { r.set_request_id(std::string(129, 'r')); }, C::INVALID_ARGUMENT,
       "request_id"},
      {"unknown model", [](auto& r) { r.set_model("gpt-17"); }, C::NOT_FOUND, "model"},
      {"oversized message (gRPC limit)", [](auto& r) { r.set_prompt(std::string(300 * 1024, 'a')); },
       C::RESOURCE_EXHAUSTED, "larger than max"},
  };
  return kTable;
}

class ValidationE2E : public SharedServerTest<ValidationE2E> {};

TEST_F(ValidationE2E, EveryBadRequestGetsItsCodeAndNamesTheField) {
  ASSERT_GE(bad_requests().size(), 20u);
  // A request generating throughout: bad input must not disturb it.
  StreamResult bystander;
  std::thread bystander_thread([&] {
    bystander = generate_stream(server_->generation(), greedy_request("The capital of France is", 16, true));
  });
  for (const BadRequest& bad : bad_requests()) {
    v1::GenerateRequest request = greedy_request("The capital of France is", 8);
    bad.make_bad(request);
    const UnaryResult unary = generate(server_->generation(), request);
    EXPECT_EQ(unary.status.error_code(), bad.code) << bad.name << ": " << unary.status.error_message();
    EXPECT_NE(unary.status.error_message().find(bad.field), std::string::npos)
        << bad.name << ": \"" << unary.status.error_message() << "\" does not name " << bad.field;
    const StreamResult stream = generate_stream(server_->generation(), request);
    EXPECT_EQ(stream.status.error_code(), bad.code) << bad.name << " (stream): " << stream.status.error_message();
    EXPECT_NE(stream.status.error_message().find(bad.field), std::string::npos)
        << bad.name << " (stream): " << stream.status.error_message();
    EXPECT_TRUE(stream.chunks.empty()) << bad.name;
  }
  bystander_thread.join();
  ASSERT_TRUE(bystander.status.ok()) << bystander.status.error_message();
  EXPECT_EQ(bystander.token_ids.size(), 16u);
  const UnaryResult alone = generate(server_->generation(), greedy_request("The capital of France is", 16, true));
  ASSERT_TRUE(alone.status.ok());
  EXPECT_EQ(bystander.text, alone.response.text()) << "the bad requests changed another request's output";
  EXPECT_TRUE(server_->wait_idle(std::chrono::seconds(10)));
}

TEST_F(ValidationE2E, BadTokenizeAndModelInfoRequestsNameTheField) {
  {
    v1::TokenizeRequest tok;
    tok.set_text("\xc0\x80");
    v1::TokenizeResponse out;
    grpc::ClientContext ctx;
    const grpc::Status s = server_->generation().Tokenize(&ctx, tok, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("text"), std::string::npos) << s.error_message();
  }
  {
    v1::TokenizeRequest tok;
    v1::TokenizeResponse out;
    grpc::ClientContext ctx;
    const grpc::Status s = server_->generation().Tokenize(&ctx, tok, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("input"), std::string::npos) << s.error_message();
  }
  {
    v1::TokenizeRequest tok;
    tok.mutable_chat()->add_messages()->set_role("wizard");
    v1::TokenizeResponse out;
    grpc::ClientContext ctx;
    const grpc::Status s = server_->generation().Tokenize(&ctx, tok, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("chat.messages[0].role"), std::string::npos) << s.error_message();
  }
  {
    v1::GetModelInfoRequest req;
    req.set_model("nope");
    v1::ModelInfo out;
    grpc::ClientContext ctx;
    const grpc::Status s = server_->generation().GetModelInfo(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("model"), std::string::npos) << s.error_message();
  }
}

}  // namespace
}  // namespace tessera::e2e
