// The OpenAI body bench serve --api openai sends for a workload request.
#include "tools/openai_stream_client.h"

#include <gtest/gtest.h>

namespace tessera::cli {
namespace {

TEST(OpenAiCompletionBody, CarriesTheWorkloadRequest) {
  v1::GenerateRequest request;
  request.set_model("m");
  request.mutable_token_ids()->add_ids(5);
  request.mutable_token_ids()->add_ids(9);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(16);
  request.mutable_stopping()->set_ignore_eos(true);
  const nlohmann::json body = openai_completion_body(request);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], nlohmann::json({5, 9}));
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);

  request.set_prompt("hello");
  EXPECT_EQ(openai_completion_body(request)["prompt"], "hello");
}

TEST(OpenAiStreamClient, AnUnreachableServerIsUnavailable) {
  OpenAiStreamClient client("127.0.0.1:1", "");
  const absl::Status s = client.run({}, [](const nlohmann::json&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

}  // namespace
}  // namespace tessera::cli
