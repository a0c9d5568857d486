// proto_codec (raw request parsing with field-naming UTF-8 errors), status_mapping, log lines.
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"
#include "server/logging.h"
#include "server/proto_codec.h"
#include "server/status_mapping.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {
namespace {

grpc::ByteBuffer buffer_of(const std::string& wire) {
  grpc::Slice slice(wire);
  return grpc::ByteBuffer(&slice, 1);
}

// Serializes `r` (which may hold invalid UTF-8: C++ protobuf only logs on serialize).
std::string wire_of(const tessera::v1::GenerateRequest& r) {
  std::string out;
  r.SerializeToString(&out);
  return out;
}

TEST(ProtoCodec, ParsesAValidRequestAndRoundTripsAResponse) {
  tessera::v1::GenerateRequest r;
  r.set_prompt("héllo");
  r.mutable_stopping()->set_max_tokens(3);
  tessera::v1::GenerateRequest parsed;
  ASSERT_TRUE(parse_request(buffer_of(wire_of(r)), parsed).ok());
  EXPECT_EQ(parsed.prompt(), "héllo");
  EXPECT_EQ(parsed.stopping().max_tokens(), 3);

  tessera::v1::GenerateResponse response;
  response.set_text("out");
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(serialize_response(response, buffer).ok());
  tessera::v1::GenerateResponse back;
  ASSERT_TRUE(parse_request(buffer, back).ok());
  EXPECT_EQ(back.text(), "out");
}

TEST(ProtoCodec, InvalidUtf8NamesTheNestedField) {
  struct Case {
    std::function<void(tessera::v1::GenerateRequest&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.set_prompt("ab\xff"); }, "prompt: invalid UTF-8 at byte offset 2"},
      {[](auto& r) {
         r.mutable_chat()->add_messages()->set_content("fine");
         r.mutable_chat()->add_messages()->set_content("\xc3(");
       },
       "chat.messages[1].content: invalid UTF-8"},
      {[](auto& r) { r.mutable_chat()->add_messages()->set_role("\xed\xa0\x80"); }, "chat.messages[0].role"},
      {[](auto& r) {
         r.set_prompt("ok");
         for (const char* s : {"a", "b", "\xf8"}) r.mutable_stopping()->add_stop(s);
       },
       "stopping.stop[2]"},
      {[](auto& r) { r.set_prompt("ok"); r.set_request_id("\x80"); }, "request_id"},
      {[](auto& r) { r.set_prompt("ok"); r.set_model("m\xc0\xaf"); }, "model"},
  };
  for (const Case& c : cases) {
    tessera::v1::GenerateRequest r;
    c.edit(r);
    tessera::v1::GenerateRequest parsed;
    const absl::Status s = parse_request(buffer_of(wire_of(r)), parsed);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(std::string(s.message()).rfind(c.field, 0), 0u) << s << " should start with " << c.field;
  }
}

TEST(ProtoCodec, GarbageIsNotAMessage) {
  tessera::v1::GenerateRequest parsed;
  const absl::Status s = parse_request(buffer_of("\x0a\xff\xff\xff"), parsed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("tessera.v1.GenerateRequest"), std::string::npos) << s;
}

TEST(StatusMapping, EveryCodeKeepsItsMeaningAndMessage) {
  const std::vector<std::pair<absl::Status, grpc::StatusCode>> cases = {
      {absl::CancelledError("c"), grpc::StatusCode::CANCELLED},
      {absl::UnknownError("c"), grpc::StatusCode::UNKNOWN},
      {absl::InvalidArgumentError("c"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::DeadlineExceededError("c"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::NotFoundError("c"), grpc::StatusCode::NOT_FOUND},
      {absl::AlreadyExistsError("c"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::PermissionDeniedError("c"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::ResourceExhaustedError("c"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::FailedPreconditionError("c"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::AbortedError("c"), grpc::StatusCode::ABORTED},
      {absl::OutOfRangeError("c"), grpc::StatusCode::OUT_OF_RANGE},
      {absl::UnimplementedError("c"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::InternalError("c"), grpc::StatusCode::INTERNAL},
      {absl::UnavailableError("c"), grpc::StatusCode::UNAVAILABLE},
      {absl::DataLossError("c"), grpc::StatusCode::DATA_LOSS},
      {absl::UnauthenticatedError("c"), grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [in, code] : cases) {
    const grpc::Status out = to_grpc_status(in);
    EXPECT_EQ(out.error_code(), code) << in;
    EXPECT_EQ(out.error_message(), "c");
  }
  EXPECT_TRUE(to_grpc_status(absl::OkStatus()).ok());
}

TEST(Logging, TextLinesEscapeControlCharactersAndCarryTheRequestId) {
  const std::string line = format_log_line(LogFormat::kText, "T", "info", "id\n1", "a\nb\x01");
  EXPECT_EQ(line, "T info [req id\\n1] a\\nb\\x01\n");
  EXPECT_EQ(format_log_line(LogFormat::kText, "T", "warn", "", "m"), "T warn m\n");
}

TEST(Logging, JsonLinesAreOneObjectEach) {
  const std::string line = format_log_line(LogFormat::kJson, "T", "info", "r-\"1\"", "he said \"hi\"\n\xff");
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "T");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["request_id"], "r-\"1\"");
  EXPECT_EQ(j["message"].get<std::string>().substr(0, 13), "he said \"hi\"\n");
  EXPECT_FALSE(nlohmann::json::parse(format_log_line(LogFormat::kJson, "T", "info", "", "m")).contains("request_id"));
}

TEST(Logging, ScopedRequestIdNests) {
  EXPECT_EQ(current_request_id(), "");
  {
    ScopedRequestId a("a");
    EXPECT_EQ(current_request_id(), "a");
    {
      ScopedRequestId b("b");
      EXPECT_EQ(current_request_id(), "b");
    }
    EXPECT_EQ(current_request_id(), "a");
  }
  EXPECT_EQ(current_request_id(), "");
  EXPECT_FALSE(setup_logging("chatty", "text").ok());
  EXPECT_FALSE(setup_logging("info", "xml").ok());
}

}  // namespace
}  // namespace tessera::server
