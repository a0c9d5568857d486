#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/small_vocab.h"

namespace tessera {
namespace {

using test_support::small_vocab;

const std::string kReplacement = "\xEF\xBF\xBD";

std::unique_ptr<Tokenizer> byte_tokenizer() {
  Vocab v = small_vocab({{"<|eot|>", TokenType::kControl}}, {});
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::create(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

TEST(IncrementalDetokenizer, HoldsBytesUntilTheCharacterIsComplete) {
  auto tok = byte_tokenizer();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.push('a'), "a");
  EXPECT_EQ(detok.push(0xF0), "");
  EXPECT_EQ(detok.push(0x9F), "");
  EXPECT_EQ(detok.push(0x98), "");
  EXPECT_EQ(detok.push(0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detok.push(0xE2), "");
  EXPECT_EQ(detok.push(0x82), "");
  EXPECT_EQ(detok.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, BytesThatCannotCompleteBecomeReplacementCharacters) {
  auto tok = byte_tokenizer();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(0xE2), "");
  EXPECT_EQ(detok.push('x'), kReplacement + "x");  // the sequence was cut short
  EXPECT_EQ(detok.push(0x80), kReplacement);       // a lone continuation byte is never held
  EXPECT_EQ(detok.push(0xFF), kReplacement);
  EXPECT_EQ(detok.push(0xF0), "");
  EXPECT_EQ(detok.push(0x9F), "");
  EXPECT_EQ(detok.flush(), kReplacement);  // what is left at the end is replaced, once
  EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, ControlTokensAreSkippedOrKept) {
  auto tok = byte_tokenizer();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer skipping(*tok);
  EXPECT_EQ(skipping.push(256), "");
  IncrementalDetokenizer keeping(*tok, /*skip_special=*/false);
  EXPECT_EQ(keeping.push(256), "<|eot|>");
}

TEST(IncrementalDetokenizer, UnknownIdsAddNothing) {
  auto tok = byte_tokenizer();
  ASSERT_NE(tok, nullptr);
  IncrementalDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(0xC3), "");
  EXPECT_EQ(detok.push(99999), "");
  EXPECT_EQ(detok.push(-1), "");
  EXPECT_EQ(detok.push(0xA9), "\xC3\xA9");  // the held byte survived the bad ids
}

}  // namespace
}  // namespace tessera
