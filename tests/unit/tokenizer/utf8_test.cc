#include "runtime/tokenizer/utf8.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
constexpr size_t npos = std::string_view::npos;

TEST(Utf8, FindInvalidAcceptsEveryLengthAndTheExtremes) {
  EXPECT_EQ(find_invalid_utf8(""), npos);
  EXPECT_EQ(find_invalid_utf8("ascii"), npos);
  EXPECT_EQ(find_invalid_utf8("\xC2\x80\xDF\xBF"), npos);                  // U+0080, U+07FF
  EXPECT_EQ(find_invalid_utf8("\xE0\xA0\x80\xEF\xBF\xBF"), npos);          // U+0800, U+FFFF
  EXPECT_EQ(find_invalid_utf8("\xED\x9F\xBF\xEE\x80\x80"), npos);          // around the surrogates
  EXPECT_EQ(find_invalid_utf8("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"), npos);  // U+10000, U+10FFFF
}

TEST(Utf8, FindInvalidGivesTheFirstBadByte) {
  EXPECT_EQ(find_invalid_utf8("ab\x80"), 2u);     // lone continuation
  EXPECT_EQ(find_invalid_utf8("a\xC0\xAF"), 1u);  // overlong 2-byte
  EXPECT_EQ(find_invalid_utf8("a\xC1\xBF"), 1u);
  EXPECT_EQ(find_invalid_utf8("\xE0\x9F\xBF"), 0u);      // overlong 3-byte
  EXPECT_EQ(find_invalid_utf8("xy\xED\xA0\x80"), 2u);    // surrogate
  EXPECT_EQ(find_invalid_utf8("\xF0\x8F\xBF\xBF"), 0u);  // overlong 4-byte
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("\xF5\x80\x80\x80"), 0u);  // never a lead byte
  EXPECT_EQ(find_invalid_utf8("ok\xFF"), 2u);
  EXPECT_EQ(find_invalid_utf8("ok\xE2\x82"), 2u);  // cut off at the end
  EXPECT_EQ(find_invalid_utf8("\xE2\x82"
                              "a"),
            0u);  // cut off by ASCII
}

TEST(Utf8, ValidateNamesOffsetAndByte) {
  EXPECT_TRUE(validate_utf8("fine \xE2\x82\xAC").ok());
  absl::Status s = validate_utf8("bad \xFF here");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("offset 4"));
  EXPECT_THAT(s.message(), HasSubstr("0xFF"));
  absl::Status cut = validate_utf8("end \xF0\x9F");
  EXPECT_THAT(cut.message(), HasSubstr("offset 4"));
  EXPECT_THAT(cut.message(), HasSubstr("cut off"));
}

TEST(Utf8, IncompleteSuffixHoldsOnlyWhatCanStillComplete) {
  EXPECT_EQ(incomplete_utf8_suffix(""), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE2"), 1u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE2\x82"), 2u);
  EXPECT_EQ(incomplete_utf8_suffix("a\xE2\x82\xAC"), 0u);  // complete euro sign
  EXPECT_EQ(incomplete_utf8_suffix("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_suffix("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_suffix("a\x80"), 0u);      // can never become valid
  EXPECT_EQ(incomplete_utf8_suffix("a\xE0\x80"), 0u);  // overlong start: invalid already
  EXPECT_EQ(incomplete_utf8_suffix("a\xED\xA0"), 0u);  // surrogate start
  EXPECT_EQ(incomplete_utf8_suffix("a\xFF"), 0u);
}

TEST(Utf8, SanitizeReplacesMaximalSubpartsLikePython) {
  // Expected values from Python's bytes.decode("utf-8", "replace"), which follows the same
  // Unicode recommendation as Rust's from_utf8_lossy.
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(sanitize_utf8("valid \xF0\x9F\x98\x80"), "valid \xF0\x9F\x98\x80");
  EXPECT_EQ(sanitize_utf8("a\xF0\x9F\x98"), "a" + r);
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), r + r);
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), r + r + r);
  EXPECT_EQ(sanitize_utf8("\xE2\x82"
                          "a"),
            r + "a");
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(sanitize_utf8("\x80"
                          "abc\xFF"),
            r + "abc" + r);
}

TEST(Utf8, AppendAndDecodeRoundTrip) {
  for (char32_t cp : {U'\0', U'A', U'\u00E9', U'\u07FF', U'\u0800', U'\uFFFD', U'\U00010000',
                      U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    append_utf8(cp, &s);
    EXPECT_EQ(find_invalid_utf8(s), npos);
    char32_t back = 0;
    EXPECT_EQ(decode_utf8(s, 0, &back), s.size());
    EXPECT_EQ(back, cp);
  }
  char32_t cp = 0;
  EXPECT_EQ(decode_utf8("\xE2\x82", 0, &cp), 0u);
}

}  // namespace
}  // namespace tessera
