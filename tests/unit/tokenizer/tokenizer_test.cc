// Tokenizer::create() validation and encode/decode rules, on small hand-made vocabs where every
// expected id can be worked out by hand.
#include "runtime/tokenizer/tokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/small_vocab.h"

namespace tessera {
namespace {

using test_support::byte_id;
using test_support::small_vocab;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 256 bytes, then: 256 "he", 257 "hel", 258 "Ġw", 259 "<|ctl|>" control, 260 "<|ctl|>more"
// control, 261 "<tool>" user-defined, 262 "<0x41>" byte token, 263 "hello" (no merge path).
Vocab test_vocab(std::string pre = "gpt2") {
  Vocab v = small_vocab({{"he"},
                         {"hel"},
                         {"\xC4\xA0w"},
                         {"<|ctl|>", TokenType::kControl},
                         {"<|ctl|>more", TokenType::kControl},
                         {"<tool>", TokenType::kUserDefined},
                         {"<0x41>", TokenType::kByte},
                         {"hello"}},
                        {"h e", "he l", "\xC4\xA0 w"}, std::move(pre));
  v.bos_id = 259;
  v.eos_id = 260;
  return v;
}

std::unique_ptr<Tokenizer> make(Vocab v) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::create(std::move(v));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

std::vector<int32_t> encode(const Tokenizer& tok, std::string_view text, bool add_special = true,
                            bool parse_special = true) {
  absl::StatusOr<std::vector<int32_t>> ids = tok.encode(text, add_special, parse_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(Tokenizer, EncodesWithMerges) {
  auto tok = make(test_vocab());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(encode(*tok, "help w"), ElementsAre(257, byte_id('p'), 258));
  EXPECT_THAT(encode(*tok, ""), ElementsAre());
}

TEST(Tokenizer, AddsBosAndEosOnlyWhenAskedAndConfigured) {
  Vocab v = test_vocab();
  v.add_bos = true;
  v.add_eos = true;
  auto tok = make(v);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(encode(*tok, "he"), ElementsAre(259, 256, 260));
  EXPECT_THAT(encode(*tok, "he", /*add_special=*/false), ElementsAre(256));
  EXPECT_THAT(encode(*tok, ""), ElementsAre(259, 260));
  auto plain = make(test_vocab());
  EXPECT_THAT(encode(*plain, "he"), ElementsAre(256));
}

TEST(Tokenizer, SpecialTokensMatchLongestFirst) {
  auto tok = make(test_vocab());
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(encode(*tok, "<|ctl|>more"), ElementsAre(260));
  EXPECT_THAT(encode(*tok, "<|ctl|>mor"),
              ElementsAre(259, byte_id('m'), byte_id('o'), byte_id('r')));
  EXPECT_THAT(encode(*tok, "he<|ctl|>he"), ElementsAre(256, 259, 256));
}

TEST(Tokenizer, ParseSpecialOffLeavesControlTokensAsTextButKeepsUserDefined) {
  auto tok = make(test_vocab());
  ASSERT_NE(tok, nullptr);
  std::vector<int32_t> ids = encode(*tok, "<|ctl|><tool>", true, /*parse_special=*/false);
  EXPECT_THAT(ids, ::testing::Not(::testing::Contains(259)));
  EXPECT_EQ(ids.back(), 261);  // "<tool>" is an added token, not a control token
  absl::StatusOr<std::string> text = tok->decode(ids);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|ctl|><tool>");
}

TEST(Tokenizer, DecodeRulesPerTokenType) {
  auto tok = make(test_vocab());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = {259, 262, 261, 258, byte_id('\n')};
  absl::StatusOr<std::string> kept = tok->decode(ids, /*skip_special=*/false);
  absl::StatusOr<std::string> skipped = tok->decode(ids, /*skip_special=*/true);
  ASSERT_TRUE(kept.ok() && skipped.ok());
  EXPECT_EQ(*kept, "<|ctl|>A<tool> w\n");
  EXPECT_EQ(*skipped, "A<tool> w\n");  // user-defined tokens are text, not control
  EXPECT_EQ(tok->token_bytes(262), "A");
  EXPECT_TRUE(tok->is_control(259));
  EXPECT_FALSE(tok->is_control(261));
  EXPECT_TRUE(tok->is_stop(260));  // eos
  EXPECT_FALSE(tok->is_stop(259));
}

TEST(Tokenizer, DecodeMayEndInsideACharacter) {
  auto tok = make(test_vocab());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = {0xE2, 0x82};
  absl::StatusOr<std::string> bytes = tok->decode(ids);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "\xE2\x82");
}

TEST(Tokenizer, StopIdsIncludeEosAndExtras) {
  Vocab v = test_vocab();
  v.stop_ids = {261};
  auto tok = make(v);
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->is_stop(260));
  EXPECT_TRUE(tok->is_stop(261));
  EXPECT_FALSE(tok->is_stop(-1));
  EXPECT_FALSE(tok->is_stop(100000));
}

TEST(Tokenizer, IgnoreMergesPresetsTakeWholeWordTokens) {
  // "hello" is a token but no merge builds it; Llama-3 style vocabs (ignore_merges) emit it
  // whole, GPT-2 style ones go through the merges.
  auto llama = make(test_vocab("llama-bpe"));
  auto gpt2 = make(test_vocab("gpt2"));
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(gpt2, nullptr);
  EXPECT_THAT(encode(*llama, "hello"), ElementsAre(263));
  EXPECT_THAT(encode(*gpt2, "hello"), ElementsAre(257, byte_id('l'), byte_id('o')));
  // The vocab's own flag (tokenizer.json's model.ignore_merges) works with any pre-tokenizer.
  Vocab flagged = test_vocab("gpt2");
  flagged.ignore_merges = true;
  auto with_flag = make(flagged);
  ASSERT_NE(with_flag, nullptr);
  EXPECT_THAT(encode(*with_flag, "hello"), ElementsAre(263));
}

TEST(Tokenizer, ExplicitPatternsOverrideThePresetName) {
  Vocab v = test_vocab("no-such-preset");
  v.pre_regexes = {"[a-z]"};  // one letter per piece: no merge can apply
  auto tok = make(v);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(encode(*tok, "he"), ElementsAre(byte_id('h'), byte_id('e')));
}

struct BadVocabCase {
  const char* name;
  void (*mutate)(Vocab*);
  const char* message;
};

TEST(Tokenizer, CreateRejectsInconsistentVocabs) {
  const BadVocabCase cases[] = {
      {"model", [](Vocab* v) { v->model = "llama"; }, "\"llama\" is not supported"},
      {"types", [](Vocab* v) { v->types.pop_back(); }, "token types"},
      {"bos", [](Vocab* v) { v->bos_id = 9999; }, "bos token id 9999"},
      {"eos", [](Vocab* v) { v->eos_id = -5; }, "eos token id -5"},
      {"stop", [](Vocab* v) { v->stop_ids = {4096}; }, "stop token id 4096"},
      {"add_bos",
       [](Vocab* v) {
         v->bos_id = -1;
         v->add_bos = true;
       },
       "no BOS"},
      {"merge part", [](Vocab* v) { v->merges.push_back("x yz"); }, "\"yz\" is not in the vocab"},
      {"merge result", [](Vocab* v) { v->merges.push_back("a b"); }, "\"ab\" is not in the vocab"},
      {"merge format", [](Vocab* v) { v->merges.push_back("abc"); }, "merge 3"},
      {"pre name", [](Vocab* v) { v->pre = "mystery"; }, "unknown pre-tokenizer \"mystery\""},
      {"pre regex", [](Vocab* v) { v->pre_regexes = {"[a-"}; }, "does not compile"},
      {"missing byte", [](Vocab* v) { v->tokens[7] = "seven"; }, "0x07"},
      {"empty",
       [](Vocab* v) {
         v->tokens.clear();
         v->types.clear();
       },
       "no tokens"},
  };
  for (const BadVocabCase& c : cases) {
    SCOPED_TRACE(c.name);
    Vocab v = test_vocab();
    c.mutate(&v);
    absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::create(std::move(v));
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(tok.status().message(), HasSubstr(c.message));
  }
}

TEST(Tokenizer, MissingByteFallsBackToTheUnknownToken) {
  Vocab v = test_vocab();
  v.tokens[7] = "seven";  // byte 0x07 has no token of its own now
  v.unk_id = 263;
  auto tok = make(v);
  ASSERT_NE(tok, nullptr);
  EXPECT_THAT(encode(*tok, "\x07"), ElementsAre(263));
}

}  // namespace
}  // namespace tessera
