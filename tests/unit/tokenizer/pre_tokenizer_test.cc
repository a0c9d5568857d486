#include "runtime/tokenizer/pre_tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Pieces = std::vector<std::string>;

Pieces split_with(const std::vector<std::string>& patterns, std::string_view text) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::create(patterns);
  EXPECT_TRUE(pre.ok()) << pre.status();
  if (!pre.ok()) return {};
  std::vector<std::string_view> views;
  absl::Status s = pre->split(text, &views);
  EXPECT_TRUE(s.ok()) << s;
  return Pieces(views.begin(), views.end());
}

Pieces split_named(std::string_view name, std::string_view text) {
  absl::StatusOr<NamedPreTokenizer> named = named_pre_tokenizer(name);
  EXPECT_TRUE(named.ok()) << named.status();
  if (!named.ok()) return {};
  return split_with(named->patterns, text);
}

TEST(PreTokenizer, Gpt2SplitsWordsSpacesAndContractions) {
  EXPECT_THAT(split_named("gpt2", "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(split_named("gpt2", "it's  done!!\n"),
              ElementsAre("it", "'s", " ", " done", "!!", "\n"));
  // A run of spaces keeps its last space for the next word.
  EXPECT_THAT(split_named("gpt2", "a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(split_named("gpt2", "x 123"), ElementsAre("x", " 123"));
  // Case-sensitive contractions: "'S" is punctuation plus a word.
  EXPECT_THAT(split_named("gpt2", "IT'S"), ElementsAre("IT", "'", "S"));
}

TEST(PreTokenizer, SmollmSplitsDigitsOneByOne) {
  EXPECT_THAT(split_named("smollm", "abc 1234"), ElementsAre("abc", " ", "1", "2", "3", "4"));
  EXPECT_THAT(split_named("smollm", "3.14"), ElementsAre("3", ".", "1", "4"));
  // \p{N} covers all numerals, not just ASCII digits.
  EXPECT_THAT(split_named("smollm", "\xD9\xA3\xD9\xA4"), ElementsAre("\xD9\xA3", "\xD9\xA4"));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndFoldsCase) {
  EXPECT_THAT(split_named("llama-bpe", "12345"), ElementsAre("123", "45"));
  EXPECT_THAT(split_named("llama3", "IT'S"), ElementsAre("IT", "'S"));
  EXPECT_THAT(split_named("llama-bpe", "a\n\n  b"), ElementsAre("a", "\n\n", " ", " b"));
  EXPECT_THAT(split_named("llama-bpe", "(hello)"), ElementsAre("(hello", ")"));
}

TEST(PreTokenizer, Qwen2SplitsEveryDigit) {
  EXPECT_THAT(split_named("qwen2", "v12"), ElementsAre("v", "1", "2"));
}

TEST(PreTokenizer, TextBetweenMatchesIsKept) {
  EXPECT_THAT(split_with({R"(\p{N})"}, "ab12cd"), ElementsAre("ab", "1", "2", "cd"));
  EXPECT_THAT(split_with({"x"}, "yyy"), ElementsAre("yyy"));
  EXPECT_THAT(split_with({}, "whole text"), ElementsAre("whole text"));
  EXPECT_THAT(split_with({R"(\p{N})"}, ""), ElementsAre());
}

TEST(PreTokenizer, LaterPatternsSeeOnePieceAsTheirWholeSubject) {
  // After "," is cut out, "a " ends its piece, so (?!\S) holds at its end even though the next
  // character of the text is ','.
  EXPECT_THAT(split_with({",", R"(\s+(?!\S))"}, "a ,b"), ElementsAre("a", " ", ",", "b"));
}

TEST(PreTokenizer, EmptyMatchesCutWithoutLooping) {
  EXPECT_THAT(split_with({R"((?=\d))"}, "ab1c2"), ElementsAre("ab", "1c", "2"));
  EXPECT_THAT(split_with({""}, "\xC3\xA9t\xC3\xA9"), ElementsAre("\xC3\xA9", "t", "\xC3\xA9"));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpaceNotPcre2s) {
  // U+180E is a format character, not White_Space (HF keeps " \u180E" together); U+3000 is.
  EXPECT_THAT(split_named("gpt2",
                          "x \xE1\xA0\x8E"
                          "b"),
              ElementsAre("x", " \xE1\xA0\x8E", "b"));
  // (Only an ASCII space joins the next word; two U+3000 would be one punctuation-like piece if
  // they were not whitespace.)
  EXPECT_THAT(split_named("gpt2",
                          "a\xE3\x80\x80\xE3\x80\x80"
                          "b"),
              ElementsAre("a", "\xE3\x80\x80", "\xE3\x80\x80", "b"));
}

TEST(PreTokenizer, WhitespaceRewriteRespectsQuotingAndClasses) {
  EXPECT_THAT(split_with({R"(\Q\s\E)"}, R"(a\sb)"), ElementsAre("a", R"(\s)", "b"));
  EXPECT_THAT(split_with({R"([[:digit:]\s]+)"}, "a1 2b"), ElementsAre("a", "1 2", "b"));
  EXPECT_THAT(split_with({R"([]\s]+)"}, "a] b"), ElementsAre("a", "] ", "b"));
  EXPECT_THAT(split_with({R"([^\S\n]+)"}, "a \t\nb"), ElementsAre("a", " \t", "\nb"));
}

TEST(PreTokenizer, EveryNamedPresetCompilesAndCoversTheText) {
  const std::string text =
      "Hello, World! It's 2024-06-01: \xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82 \xF0\x9F\x98\x80\n\n"
      "  code(x) { return 42; }\t\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 I'M ok   ";
  const std::vector<std::string> names = known_pre_tokenizer_names();
  EXPECT_GE(names.size(), 20u);
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    Pieces pieces = split_named(name, text);
    std::string joined;
    for (const std::string& p : pieces) {
      EXPECT_FALSE(p.empty());
      joined += p;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(PreTokenizer, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<NamedPreTokenizer> named = named_pre_tokenizer("no-such-model");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(named.status().message(), HasSubstr("no-such-model"));
  EXPECT_THAT(named.status().message(), HasSubstr("smollm"));
  EXPECT_THAT(named.status().message(), HasSubstr("llama-bpe"));
}

TEST(PreTokenizer, BadPatternIsAnErrorNamingIt) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::create({"ok", "(unclosed"});
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pre.status().message(), HasSubstr("pattern 1"));
  EXPECT_THAT(pre.status().message(), HasSubstr("(unclosed"));
}

TEST(PreTokenizer, InvalidUtf8TextIsAnError) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::create({R"(\p{L}+)"});
  ASSERT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string_view> pieces;
  absl::Status s = pre->split("ab\xFF", &pieces);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("offset 2"));
}

TEST(PreTokenizer, DeeplyBacktrackingPatternOnLongInputSucceeds) {
  // A repeated group keeps a backtracking frame per iteration; on 1 MB this outgrows PCRE2's
  // default 32 KiB JIT stack, which split() must replace instead of failing.
  std::string text;
  for (int i = 0; i < 500000; ++i) text += "ab";
  Pieces pieces = split_with({"(?:a|b)+"}, text);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].size(), text.size());
}

}  // namespace
}  // namespace tessera
