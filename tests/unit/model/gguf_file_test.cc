#include "runtime/model_io/gguf_file.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;

// One value of every metadata type, including an array of arrays.
GgufBuilder all_types_builder() {
  GgufBuilder b;
  b.kv_u8("t.u8", 200)
      .kv_i8("t.i8", -100)
      .kv_u16("t.u16", 60000)
      .kv_i16("t.i16", -30000)
      .kv_u32("t.u32", 4000000000u)
      .kv_i32("t.i32", -2000000000)
      .kv_f32("t.f32", 1.5f)
      .kv_bool("t.bool", true)
      .kv_string("t.string", std::string("h\xc3\xa9llo\0x", 8))
      .kv_u64("t.u64", 18000000000000000000ull)
      .kv_i64("t.i64", -9000000000000000000ll)
      .kv_f64("t.f64", -2.25)
      .kv_string_array("t.strings", {"a", "", "ccc"})
      .kv_i32_array("t.i32s", {-1, 0, 7})
      .kv_f32_array("t.f32s", {0.5f, -4.0f});
  std::string u16s;
  for (uint16_t v : {1, 65535}) testing::put_le(u16s, v);
  b.kv_raw("t.u16s", GgufType::kArray, GgufBuilder::array_payload(GgufType::kU16, 2, u16s));
  std::string f64s;
  testing::put_le(f64s, 3.0);
  b.kv_raw("t.f64s", GgufType::kArray, GgufBuilder::array_payload(GgufType::kF64, 1, f64s));
  b.kv_raw("t.bools", GgufType::kArray,
           GgufBuilder::array_payload(GgufType::kBool, 3, std::string("\1\0\1", 3)));
  // [[1, 2], [], [3]] as u8 arrays.
  std::string nested;
  nested += GgufBuilder::array_payload(GgufType::kU8, 2, "\x01\x02");
  nested += GgufBuilder::array_payload(GgufType::kU8, 0, "");
  nested += GgufBuilder::array_payload(GgufType::kU8, 1, "\x03");
  b.kv_raw("t.nested", GgufType::kArray, GgufBuilder::array_payload(GgufType::kArray, 3, nested));
  b.kv_raw("t.empty", GgufType::kArray, GgufBuilder::array_payload(GgufType::kString, 0, ""));
  return b;
}

TEST(GgufFileTest, EveryMetadataTypeRoundTrips) {
  TempDir dir;
  const std::string path = dir.write("all.gguf", all_types_builder().build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(path));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 20u);
  EXPECT_EQ(f->metadata()[0].key, "t.u8");  // file order is kept

  EXPECT_EQ(f->find("t.u8")->type, GgufType::kU8);
  EXPECT_EQ(f->find("t.u8")->u, 200u);
  EXPECT_EQ(f->find("t.i8")->i, -100);
  EXPECT_EQ(f->find("t.u16")->u, 60000u);
  EXPECT_EQ(f->find("t.i16")->i, -30000);
  EXPECT_EQ(*f->get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(*f->get_i32("t.i32"), -2000000000);
  EXPECT_EQ(*f->get_f32("t.f32"), 1.5f);
  EXPECT_TRUE(*f->get_bool("t.bool"));
  EXPECT_EQ(*f->get_string("t.string"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(*f->get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(*f->get_i64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(*f->get_f64("t.f64"), -2.25);
  EXPECT_EQ(*f->get_f32("t.f64"), -2.25f);
  EXPECT_EQ(*f->get_string_array("t.strings"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f->get_int_array("t.i32s"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(*f->get_int_array("t.u16s"), (std::vector<int64_t>{1, 65535}));
  EXPECT_EQ(*f->get_float_array("t.f32s"), (std::vector<float>{0.5f, -4.0f}));
  EXPECT_EQ(*f->get_float_array("t.f64s"), (std::vector<float>{3.0f}));
  EXPECT_EQ(*f->get_array_size("t.strings"), 3u);
  EXPECT_EQ(*f->get_array_size("t.empty"), 0u);
  EXPECT_TRUE(f->get_string_array("t.empty")->empty());

  const GgufValue* bools = f->find("t.bools");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->elem_type, GgufType::kBool);
  ASSERT_EQ(bools->count, 3u);
  EXPECT_EQ(bools->elems[0], 1);
  EXPECT_EQ(bools->elems[1], 0);

  const GgufValue* nested = f->find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->elem_type, GgufType::kArray);
  ASSERT_EQ(nested->arrays.size(), 3u);
  EXPECT_EQ(nested->arrays[0].elem_type, GgufType::kU8);
  ASSERT_EQ(nested->arrays[0].count, 2u);
  EXPECT_EQ(nested->arrays[0].elems[1], 2);
  EXPECT_EQ(nested->arrays[1].count, 0u);
  EXPECT_EQ(nested->arrays[2].elems[0], 3);
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufFileTest, IntegerGettersAcceptAnyWidthThatFits) {
  TempDir dir;
  GgufBuilder b;
  b.kv_u8("small", 7).kv_i64("wide", 4096).kv_i32("negative", -1).kv_u64("huge", 1ull << 40);
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(dir.write("ints.gguf", b.build())));
  EXPECT_EQ(*f->get_u32("small"), 7u);
  EXPECT_EQ(*f->get_i64("small"), 7);
  EXPECT_EQ(*f->get_u32("wide"), 4096u);
  EXPECT_EQ(*f->get_i32("negative"), -1);
  EXPECT_EQ(*f->get_u64("huge"), 1ull << 40);

  absl::Status st = f->get_u32("negative").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(st.message(), HasSubstr("'negative'"));
  EXPECT_THAT(st.message(), HasSubstr("-1"));
  EXPECT_THAT(f->get_u32("huge").status().message(), HasSubstr("does not fit in u32"));
  EXPECT_FALSE(f->get_i32("huge").ok());
}

TEST(GgufFileTest, GetterErrorsNameFileKeyAndActualType) {
  TempDir dir;
  GgufBuilder b;
  b.kv_u32("n", 3).kv_string("s", "x").kv_i32_array("ints", {1}).kv_f32("f", 1.0f);
  const std::string path = dir.write("typed.gguf", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(path));

  absl::Status st = f->get_string("n").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("'n' has type u32, expected string"));

  EXPECT_THAT(f->get_u32("s").status().message(), HasSubstr("'s' has type string"));
  EXPECT_THAT(f->get_f32("n").status().message(), HasSubstr("'n' has type u32"));
  EXPECT_THAT(f->get_u32("f").status().message(), HasSubstr("'f' has type f32"));
  EXPECT_THAT(f->get_bool("n").status().message(), HasSubstr("expected bool"));
  EXPECT_THAT(f->get_string_array("ints").status().message(),
              HasSubstr("'ints' has type array of i32, expected array of string"));
  EXPECT_THAT(f->get_float_array("ints").status().message(), HasSubstr("array of i32"));
  EXPECT_THAT(f->get_int_array("s").status().message(), HasSubstr("has type string"));
  EXPECT_FALSE(f->get_array_size("n").ok());

  st = f->get_u32("absent").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr(path));
  EXPECT_THAT(st.message(), HasSubstr("'absent' is missing"));
  EXPECT_FALSE(f->has("absent"));
  EXPECT_EQ(f->find("absent"), nullptr);
}

TEST(GgufFileTest, TensorInfosAreInHfOrderWithBoundedData) {
  TempDir dir;
  GgufBuilder b;
  b.kv_string("general.architecture", "llama");
  std::vector<float> mat(3 * 2);
  for (size_t i = 0; i < mat.size(); ++i) mat[i] = static_cast<float>(i);
  b.f32_tensor("mat", {3, 2}, mat);                             // ne = [3, 2] -> HF [2, 3]
  b.tensor("q", /*Q8_0=*/8, {32, 2}, std::string(68, '\x01'));  // [2, 32], 2 blocks
  b.f32_tensor("vec", {5}, {1, 2, 3, 4, 5});
  const std::string path = dir.write("t.gguf", b.build());
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(path));
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  ASSERT_EQ(f->tensors().size(), 3u);

  const GgufTensorInfo* m = f->find_tensor("mat");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m->dtype, DType::kF32);
  EXPECT_EQ(m->n_elements, 6);
  EXPECT_EQ(m->nbytes, 24u);
  EXPECT_EQ(m->offset, 0u);
  std::span<const uint8_t> bytes = f->tensor_bytes(*m);
  ASSERT_EQ(bytes.size(), 24u);
  float last;
  std::memcpy(&last, bytes.data() + 20, 4);
  EXPECT_EQ(last, 5.0f);

  const GgufTensorInfo* q = f->find_tensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->nbytes, 68u);
  EXPECT_EQ(q->offset, 32u);  // 24 bytes of "mat", padded to the alignment
  EXPECT_EQ(f->find_tensor("vec")->shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

TEST(GgufFileTest, CustomAlignmentAndVersion2) {
  TempDir dir;
  GgufBuilder b;
  b.version(2).layout_alignment(64).kv_u32("general.alignment", 64);
  b.f32_tensor("a", {3}, {1, 2, 3}).f32_tensor("b", {1}, {9});
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(dir.write("a64.gguf", b.build())));
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->find_tensor("b")->offset, 64u);
  float v;
  std::memcpy(&v, f->tensor_bytes(*f->find_tensor("b")).data(), 4);
  EXPECT_EQ(v, 9.0f);
}

// Two tensors that share bytes are refused, naming both (the one that starts later is the one
// reported): an alias at the same offset, a tensor whose data starts inside another's, and one
// that begins inside a third tensor listed before both. Tensors that only touch are fine.
TEST(GgufFileTest, TensorsSharingBytesAreRefusedNamingBoth) {
  TempDir dir;
  {
    GgufBuilder b;
    b.f32_tensor("a", {4}, {1, 2, 3, 4});
    b.raw_tensor_info("alias", 0, {2}, 0);
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(dir.write("alias.gguf", b.build()));
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(f.status().message()),
                HasSubstr("tensor 'alias': data [0, 8) overlaps tensor 'a' at [0, 16): tensors "
                          "must not share bytes"));
  }
  {
    // "b" starts at 32 (aligned), "inside" at 64 inside "big" [32, 96).
    GgufBuilder b;
    b.f32_tensor("first", {8}, std::vector<float>(8, 1.0f));
    b.f32_tensor("big", {16}, std::vector<float>(16, 2.0f));
    b.raw_tensor_info("inside", 0, {8}, 64);
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(dir.write("inside.gguf", b.build()));
    ASSERT_FALSE(f.ok());
    EXPECT_THAT(std::string(f.status().message()),
                HasSubstr("tensor 'inside': data [64, 96) overlaps tensor 'big' at [32, 96)"));
  }
  GgufBuilder ok;
  ok.f32_tensor("a", {8}, std::vector<float>(8, 1.0f));  // [0, 32)
  ok.raw_tensor_info("touching", 0, {8}, 32);            // [32, 64): no shared byte
  ok.trailing(std::string(32, '\0'));
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f, GgufFile::open(dir.write("touching.gguf", ok.build())));
  EXPECT_EQ(f->tensors().size(), 2u);
}

TEST(GgufFileTest, HeaderOnlyFileOpens) {
  TempDir dir;
  TESSERA_ASSERT_OK_AND_ASSIGN(auto f,
                               GgufFile::open(dir.write("empty.gguf", GgufBuilder().build())));
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_TRUE(f->tensors().empty());
}

}  // namespace
}  // namespace tessera
