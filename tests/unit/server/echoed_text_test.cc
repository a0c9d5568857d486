#include "server/echoed_text.h"

#include <gtest/gtest.h>

#include <string>

#include "server/request_validation.h"

namespace tessera::server {
namespace {

TEST(EchoedText, ShortTextIsKeptWhole) {
  EXPECT_EQ(echoed_text("llama-3"), "llama-3");
  const std::string exactly(kMaxEchoedBytes, 'a');
  EXPECT_EQ(echoed_text(exactly), exactly);
}

TEST(EchoedText, LongTextIsCutWithAnEllipsis) {
  const std::string long_name(10000, 'x');
  const std::string echoed = echoed_text(long_name);
  EXPECT_EQ(echoed, std::string(kMaxEchoedBytes, 'x') + "...");
}

TEST(EchoedText, CutNeverSplitsAUtf8Character) {
  // 255 ASCII bytes, then a 3-byte character across the 256-byte mark.
  const std::string text = std::string(255, 'a') + "\xE2\x82\xAC" + std::string(100, 'b');
  const std::string echoed = echoed_text(text);
  EXPECT_EQ(echoed, std::string(255, 'a') + "...");
  // A 4-byte character ending exactly at the mark stays.
  const std::string four = std::string(252, 'a') + "\xF0\x9F\x98\x80" + "tail";
  EXPECT_EQ(echoed_text(four), std::string(252, 'a') + "\xF0\x9F\x98\x80" + "...");
}

TEST(EchoedText, InvalidUtf8IsCutWhereAsked) {
  const std::string text(300, '\x80');  // continuation bytes only
  EXPECT_EQ(echoed_text(text, 10), std::string(10, '\x80') + "...");
}

TEST(EchoedText, UnknownModelNameIsTruncatedInNotFound) {
  ModelLimits limits;
  limits.model_id = "served";
  const std::string name(100000, 'm');
  const absl::Status s = validate_model(name, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_LT(s.message().size(), 400u) << s.message().substr(0, 100);
  EXPECT_NE(s.message().find(std::string(kMaxEchoedBytes, 'm') + "..."), absl::string_view::npos);
  EXPECT_NE(s.message().find("served: \"served\""), absl::string_view::npos);
}

}  // namespace
}  // namespace tessera::server
