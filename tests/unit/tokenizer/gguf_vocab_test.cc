#include "runtime/model_io/gguf_file.h"
#include "runtime/tokenizer/vocab.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;

class GgufVocabTest : public ::testing::Test {
 protected:
  absl::StatusOr<Vocab> vocab_of(const GgufBuilder& b, std::string_view name = "v.gguf") {
    path_ = dir_.write(name, b.build());
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(path_);
    if (!f.ok()) return f.status();
    return vocab_from_gguf(**f);
  }

  // A ChatML-style vocab: 0 <|endoftext|> (control), 1 <|im_start|>, 2 <|im_end|> (control),
  // 3..5 normal, 6 <|eot_id|> typed as normal text (so not a stop token).
  static GgufBuilder base() {
    GgufBuilder b;
    b.kv_string("tokenizer.ggml.model", "gpt2")
        .kv_string_array("tokenizer.ggml.tokens", {"<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                                   "a", "b", "ab", "<|eot_id|>"})
        .kv_i32_array("tokenizer.ggml.token_type", {3, 3, 3, 1, 1, 1, 1})
        .kv_string_array("tokenizer.ggml.merges", {"a b"});
    return b;
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(GgufVocabTest, ReadsEverything) {
  GgufBuilder b = base();
  b.kv_string("tokenizer.ggml.pre", "smollm")
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 0)
      .kv_u32("tokenizer.ggml.unknown_token_id", 0)
      .kv_u32("tokenizer.ggml.padding_token_id", 5)
      .kv_bool("tokenizer.ggml.add_bos_token", true)
      .kv_bool("tokenizer.ggml.add_eos_token", false)
      .kv_string("tokenizer.chat_template", "{{ messages }}");
  TESSERA_ASSERT_OK_AND_ASSIGN(Vocab v, vocab_of(b));
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "smollm");
  ASSERT_EQ(v.tokens.size(), 7u);
  EXPECT_EQ(v.tokens[5], "ab");
  EXPECT_EQ(v.types[0], TokenType::kControl);
  EXPECT_EQ(v.types[3], TokenType::kNormal);
  EXPECT_THAT(v.merges, ElementsAre("a b"));
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 0);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.pad_id, 5);
  EXPECT_TRUE(v.add_bos);
  EXPECT_FALSE(v.add_eos);
  EXPECT_EQ(v.chat_template, "{{ messages }}");
  // eos first, then control end-of-turn texts; <|eot_id|> is typed normal here so it is not one.
  EXPECT_THAT(v.stop_ids, ElementsAre(0, 2));
}

TEST_F(GgufVocabTest, Defaults) {
  GgufBuilder b;
  b.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string_array("tokenizer.ggml.tokens", {"x", "y"})
      .kv_string_array("tokenizer.ggml.merges", {});
  TESSERA_ASSERT_OK_AND_ASSIGN(Vocab v, vocab_of(b));
  EXPECT_EQ(v.pre, "default");
  EXPECT_THAT(v.types, ElementsAre(TokenType::kNormal, TokenType::kNormal));
  EXPECT_EQ(v.bos_id, -1);
  EXPECT_EQ(v.eos_id, -1);
  EXPECT_FALSE(v.add_bos);
  EXPECT_TRUE(v.chat_template.empty());
  EXPECT_TRUE(v.stop_ids.empty());
}

TEST_F(GgufVocabTest, EndOfTurnKeys) {
  GgufBuilder b = base();
  b.kv_u32("tokenizer.ggml.eos_token_id", 0)
      .kv_u32("tokenizer.ggml.eot_token_id", 6)
      .kv_u32("tokenizer.ggml.eom_token_id", 0);  // duplicates are dropped; sorted
  TESSERA_ASSERT_OK_AND_ASSIGN(Vocab v, vocab_of(b));
  EXPECT_THAT(v.stop_ids, ElementsAre(0, 2, 6));
}

TEST_F(GgufVocabTest, OnlyByteLevelBpe) {
  GgufBuilder b;
  b.kv_string("tokenizer.ggml.model", "llama").kv_string_array("tokenizer.ggml.tokens", {"x"});
  absl::Status st = vocab_of(b).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr("tokenizer.ggml.model is 'llama'; only byte-level BPE"));

  GgufBuilder none;
  none.kv_string_array("tokenizer.ggml.tokens", {"x"});
  EXPECT_THAT(vocab_of(none, "none.gguf").status().message(),
              HasSubstr("'tokenizer.ggml.model' is missing"));
}

TEST_F(GgufVocabTest, Errors) {
  GgufBuilder range = base();
  range.kv_u32("tokenizer.ggml.eos_token_id", 7);
  absl::Status st = vocab_of(range, "range.gguf").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(),
              HasSubstr("tokenizer.ggml.eos_token_id 7 is out of range for 7 tokens"));

  GgufBuilder neg = base();
  neg.kv_i32("tokenizer.ggml.padding_token_id", -1);
  EXPECT_THAT(vocab_of(neg, "neg.gguf").status().message(),
              HasSubstr("tokenizer.ggml.padding_token_id -1 is out of range"));

  GgufBuilder eot = base();
  eot.kv_u32("tokenizer.ggml.eot_token_id", 100);
  EXPECT_THAT(vocab_of(eot, "eot.gguf").status().message(),
              HasSubstr("tokenizer.ggml.eot_token_id 100"));

  GgufBuilder types;
  types.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string_array("tokenizer.ggml.tokens", {"a", "b"})
      .kv_i32_array("tokenizer.ggml.token_type", {1})
      .kv_string_array("tokenizer.ggml.merges", {});
  EXPECT_THAT(vocab_of(types, "types.gguf").status().message(),
              HasSubstr("tokenizer.ggml.token_type has 1 entries but there are 2 tokens"));

  GgufBuilder bad_type;
  bad_type.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string_array("tokenizer.ggml.tokens", {"a"})
      .kv_i32_array("tokenizer.ggml.token_type", {9})
      .kv_string_array("tokenizer.ggml.merges", {});
  EXPECT_THAT(vocab_of(bad_type, "badtype.gguf").status().message(),
              HasSubstr("entry 0 is 9, not a token type"));

  GgufBuilder no_merges;
  no_merges.kv_string("tokenizer.ggml.model", "gpt2")
      .kv_string_array("tokenizer.ggml.tokens", {"a"});
  EXPECT_THAT(vocab_of(no_merges, "nomerges.gguf").status().message(),
              HasSubstr("'tokenizer.ggml.merges' is missing"));

  GgufBuilder flag = base();
  flag.kv_u32("tokenizer.ggml.add_bos_token", 1);
  EXPECT_THAT(vocab_of(flag, "flag.gguf").status().message(),
              HasSubstr("'tokenizer.ggml.add_bos_token' has type u32, expected bool"));
}

TEST_F(GgufVocabTest, DefaultModel) {
  if (!std::filesystem::exists(TESSERA_DEFAULT_MODEL)) GTEST_SKIP() << "no default model";
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(TESSERA_DEFAULT_MODEL));
  TESSERA_ASSERT_OK_AND_ASSIGN(Vocab v, vocab_from_gguf(*f));
  EXPECT_EQ(v.pre, "smollm");
  EXPECT_EQ(v.tokens.size(), 49152u);
  EXPECT_EQ(v.merges.size(), 48900u);
  EXPECT_EQ(v.bos_id, 1);
  EXPECT_EQ(v.eos_id, 2);
  EXPECT_EQ(v.pad_id, 2);
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.tokens[2], "<|im_end|>");
  EXPECT_EQ(v.tokens[0], "<|endoftext|>");
  EXPECT_THAT(v.stop_ids, ElementsAre(0, 2));  // <|endoftext|> and eos <|im_end|>, sorted
  EXPECT_THAT(v.chat_template, HasSubstr("<|im_start|>"));
}

}  // namespace
}  // namespace tessera
