// generate / chat / models / tokenize against an in-process mock server: what reaches the
// server, what the user sees, and how errors read.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/tools/mock_generation_server.h"
#include "tools/commands.h"
#include "tools/proto_text.h"
#include "tools/remote_generation.h"
#include "tools/server_connection.h"
#include "tools/text_table.h"

namespace tessera::cli {
namespace {

using testing::MockBehavior;
using testing::MockServer;

struct Argv {
  explicit Argv(std::vector<std::string> words) : words_(std::move(words)) {
    for (std::string& w : words_) ptrs_.push_back(w.data());
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  char** argv() { return ptrs_.data(); }
  std::vector<std::string> words_;
  std::vector<char*> ptrs_;
};

struct Output {
  int rc;
  std::string out;
  std::string err;
};

Output run(int (*command)(int, char**), std::vector<std::string> words) {
  Argv args(std::move(words));
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = command(args.argc(), args.argv());
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  return {rc, out, err};
}

std::unique_ptr<ServerConnection> connect(const std::string& address) {
  ConnectionOptions options;
  options.address = address;
  return *ServerConnection::open(options);
}

TEST(RemoteGeneration, StreamingJoinsTheDeltas) {
  MockServer server;
  auto connection = connect(server.address());
  v1::GenerateRequest request;
  request.set_prompt("hello there");
  request.mutable_stopping()->set_max_tokens(3);
  grpc::ClientContext context;
  std::vector<std::string> deltas;
  auto result = generate_streaming(*connection, context, request,
                                   [&deltas](const std::string& d) { deltas.push_back(d); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(deltas, (std::vector<std::string>{"t0 ", "t1 ", "t2 "}));
  EXPECT_EQ(result->text, "t0 t1 t2 ");
  EXPECT_EQ(result->token_ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(result->finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(result->usage.prompt_tokens(), 3);
  EXPECT_EQ(result->usage.completion_tokens(), 3);
  EXPECT_EQ(result->chunks, 4);
  EXPECT_GE(result->total_seconds, result->ttft_seconds);
  const std::string summary = summary_line(*result);
  EXPECT_NE(summary.find("prompt 3 tokens, generated 3 tokens (length)"), std::string::npos)
      << summary;
}

TEST(RemoteGeneration, UnaryGivesTheSameText) {
  MockServer server;
  auto connection = connect(server.address());
  v1::GenerateRequest request;
  request.set_prompt("hello");
  request.mutable_stopping()->set_max_tokens(5);
  grpc::ClientContext a, b;
  auto streamed = generate_streaming(*connection, a, request, nullptr);
  auto unary = generate_unary(*connection, b, request);
  ASSERT_TRUE(streamed.ok() && unary.ok());
  EXPECT_EQ(streamed->text, unary->text);
  EXPECT_EQ(streamed->token_ids, unary->token_ids);
}

TEST(RemoteGeneration, ErrorsNameTheCode) {
  MockServer server;
  auto connection = connect(server.address());
  v1::GenerateRequest request;
  request.set_prompt("");
  grpc::ClientContext context;
  auto result = generate_streaming(*connection, context, request, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "INVALID_ARGUMENT: prompt: must not be empty");
}

TEST(RemoteGeneration, NoServerNamesTheAddress) {
  const std::string address = testing::unused_address();
  auto connection = connect(address);
  v1::GenerateRequest request;
  request.set_prompt("x");
  grpc::ClientContext context;
  auto result = generate_streaming(*connection, context, request, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  const std::string message(result.status().message());
  EXPECT_EQ(message.rfind("cannot connect to tesserad at " + address + ": UNAVAILABLE: ", 0), 0u)
      << message;
}

TEST(GenerateCommand, StreamsTextToStdoutAndSummaryToStderr) {
  MockServer server;
  const Output o =
      run(generate_command, {"--server", server.address(), "--max-tokens", "4", "--temperature",
                             "0", "--stop", "x", "--seed", "7", "Hello world"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "t0 t1 t2 t3 ");
  EXPECT_NE(o.err.find("[prompt 3 tokens, generated 4 tokens (length), TTFT"), std::string::npos)
      << o.err;
  const v1::GenerateRequest& sent = server.service().last_request();
  EXPECT_EQ(sent.prompt(), "Hello world");
  EXPECT_EQ(sent.stopping().max_tokens(), 4);
  EXPECT_FLOAT_EQ(sent.sampling().temperature(), 0.0f);
  EXPECT_EQ(sent.sampling().seed(), 7u);
  ASSERT_EQ(sent.stopping().stop_size(), 1);
}

TEST(GenerateCommand, ChatUnaryAndLogprobs) {
  MockServer server;
  const Output o =
      run(generate_command, {"--server", server.address(), "--chat", "--system", "be brief",
                             "--unary", "--max-tokens", "2", "--logprobs", "2", "Hi"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "t0 t1 ");
  const v1::GenerateRequest& sent = server.service().last_request();
  ASSERT_TRUE(sent.has_chat());
  ASSERT_EQ(sent.chat().messages_size(), 2);
  EXPECT_EQ(sent.chat().messages(0).role(), "system");
  EXPECT_EQ(sent.chat().messages(1).role(), "user");
  EXPECT_EQ(sent.chat().messages(1).content(), "Hi");
  EXPECT_TRUE(sent.logprobs());
  EXPECT_EQ(sent.top_logprobs(), 2);
  EXPECT_NE(o.err.find("LOGPROB"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("\"t1 \""), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("-0.500"), std::string::npos) << o.err;
}

TEST(GenerateCommand, ErrorsAreOneClearLine) {
  MockServer server;
  Output o = run(generate_command, {"--server", server.address(), ""});
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.err, "tessera generate: INVALID_ARGUMENT: prompt: must not be empty\n");

  const std::string address = testing::unused_address();
  o = run(generate_command, {"--server", address, "hi"});
  EXPECT_EQ(o.rc, 1);
  EXPECT_EQ(o.err.rfind("tessera generate: cannot connect to tesserad at " + address, 0), 0u)
      << o.err;

  o = run(generate_command, {"--top-p", "2", "hi"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err, "tessera generate: --top-p must be in (0, 1]\n");

  o = run(generate_command, {"one", "two"});
  EXPECT_EQ(o.rc, 2);
  o = run(generate_command, {"--bogus", "hi"});
  EXPECT_EQ(o.rc, 2);
  EXPECT_EQ(o.err, "tessera generate: unknown flag --bogus\n");
}

TEST(ChatCommand, KeepsTheConversationAndResets) {
  MockServer server(MockBehavior{});
  std::istringstream input("first question\n\n/reset\nsecond\n  third  \n/exit\nnever sent\n");
  std::streambuf* saved = std::cin.rdbuf(input.rdbuf());
  const Output o =
      run(chat_command, {"--server", server.address(), "--max-tokens", "2", "--system", "sys"});
  std::cin.rdbuf(saved);
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out, "t0 t1 \nt0 t1 \nt0 t1 \n");
  EXPECT_EQ(server.service().calls(), 3);
  EXPECT_NE(o.err.find("[conversation reset]"), std::string::npos);
}

TEST(ChatCommand, TheConversationGrows) {
  // A server that records every request: the third turn carries system + 2 exchanges + question.
  class Recording final : public v1::Generation::Service {
   public:
    grpc::Status GenerateStream(grpc::ServerContext*, const v1::GenerateRequest* request,
                                grpc::ServerWriter<v1::GenerateStreamChunk>* writer) override {
      requests.push_back(*request);
      v1::GenerateStreamChunk chunk;
      chunk.add_token_ids(1);
      chunk.set_text(absl::StrCat("answer", requests.size()));
      chunk.set_finish_reason(v1::FINISH_REASON_EOS);
      writer->Write(chunk);
      return grpc::Status::OK;
    }
    std::vector<v1::GenerateRequest> requests;
  } service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();

  std::istringstream input("a\nb\nc\n");
  std::streambuf* saved = std::cin.rdbuf(input.rdbuf());
  const Output o =
      run(chat_command, {"--server", absl::StrCat("127.0.0.1:", port), "--system", "S"});
  std::cin.rdbuf(saved);
  server->Shutdown();
  ASSERT_EQ(o.rc, 0) << o.err;
  ASSERT_EQ(service.requests.size(), 3u);
  const v1::ChatInput& last = service.requests[2].chat();
  std::vector<std::string> turns;
  for (const auto& m : last.messages()) turns.push_back(m.role() + ":" + m.content());
  EXPECT_EQ(turns, (std::vector<std::string>{"system:S", "user:a", "assistant:answer1", "user:b",
                                             "assistant:answer2", "user:c"}));
}

TEST(ChatCommand, AFailedTurnIsForgottenAndReported) {
  MockServer server(MockBehavior{.fail_every = 1});
  std::istringstream input("hello\n");
  std::streambuf* saved = std::cin.rdbuf(input.rdbuf());
  const Output o = run(chat_command, {"--server", server.address()});
  std::cin.rdbuf(saved);
  EXPECT_EQ(o.rc, 1);  // scripted input: the failure shows in the exit code
  EXPECT_NE(o.err.find("tessera chat: RESOURCE_EXHAUSTED: queue full"), std::string::npos) << o.err;
}

TEST(ModelsCommand, Table) {
  MockServer server;
  const Output o = run(models_command, {"--server", server.address()});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out.rfind("ID ", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("mock"), std::string::npos);
  EXPECT_NE(o.out.find("/models/mock.gguf"), std::string::npos);
  EXPECT_NE(o.out.find("4096"), std::string::npos);
  EXPECT_NE(o.out.find("4/2"), std::string::npos);
}

TEST(TokenizeCommand, TableAndIds) {
  MockServer server;
  Output o = run(tokenize_command, {"--server", server.address(), "ab cde"});
  ASSERT_EQ(o.rc, 0) << o.err;
  EXPECT_EQ(o.out,
            "#   ID  TOKEN\n"
            "0    1  \"<s>\"\n"
            "1  102  \" ab\"\n"
            "2  103  \" cde\"\n"
            "3 tokens\n");
  o = run(tokenize_command,
          {"--server", server.address(), "--no-special-tokens", "--ids", "ab cde"});
  ASSERT_EQ(o.rc, 0);
  EXPECT_EQ(o.out, "102 103\n");
  o = run(tokenize_command, {"--server", server.address(), "--chat", "--ids", "ab"});
  EXPECT_EQ(o.out, "102\n");
}

TEST(ProtoText, QuoteToken) {
  EXPECT_EQ(quote_token(" hi"), "\" hi\"");
  EXPECT_EQ(quote_token("a\nb\t\"\\"), "\"a\\nb\\t\\\"\\\\\"");
  EXPECT_EQ(quote_token("\xc3\xa9"), "\"\xc3\xa9\"");  // é stays
  EXPECT_EQ(quote_token("\xc3"), "\"\\xc3\"");         // half of it does not
  EXPECT_EQ(quote_token(std::string("\0\x7f", 2)), "\"\\x00\\x7f\"");
  EXPECT_EQ(display_width("h\xc3\xa9llo"), 5u);
}

TEST(TextTable, AlignsColumns) {
  TextTable t({{"NAME"}, {"N", true}});
  t.add_row({"a", "1"});
  t.add_row({"longer", "100", "dropped"});
  t.add_row({"x"});
  EXPECT_EQ(t.render(), "NAME      N\na         1\nlonger  100\nx\n");
  EXPECT_EQ(t.render(false), "a         1\nlonger  100\nx\n");
}

}  // namespace
}  // namespace tessera::cli
