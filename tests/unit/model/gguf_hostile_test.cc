// Malformed and hostile GGUF files: each must be rejected with a message naming the file and the
// offending key or tensor, without crashing, reading out of bounds or allocating on a lie.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model_io/gguf_file.h"
#include "tests/unit/model/gguf_builder.h"

namespace tessera {
namespace {

using testing::GgufBuilder;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kQ4_0 = 2;
constexpr uint32_t kF64 = 28;

class GgufHostileTest : public ::testing::Test {
 protected:
  // Opens `bytes` written as <name>; expects failure and returns the message.
  std::string open_error(std::string_view name, const std::string& bytes) {
    const std::string path = dir_.write(name, bytes);
    absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(path);
    EXPECT_FALSE(f.ok()) << name << " unexpectedly opened";
    if (f.ok()) return "";
    const std::string msg(f.status().message());
    EXPECT_THAT(msg, HasSubstr(path)) << "message does not name the file";
    return msg;
  }

  TempDir dir_;
};

TEST_F(GgufHostileTest, BadMagic) {
  EXPECT_THAT(open_error("magic.gguf", GgufBuilder().magic(0x46554746).build()),
              HasSubstr("bad magic"));
  EXPECT_THAT(open_error("short.gguf", "GG"), HasSubstr("bad magic"));
  EXPECT_THAT(open_error("zero.gguf", ""), HasSubstr("bad magic"));
}

TEST_F(GgufHostileTest, Versions) {
  EXPECT_THAT(open_error("v1.gguf", GgufBuilder().version(1).build()),
              HasSubstr("version 1 is not supported"));
  EXPECT_THAT(open_error("v7.gguf", GgufBuilder().version(7).build()),
              HasSubstr("version 7 is not supported"));
  EXPECT_THAT(open_error("be.gguf", GgufBuilder().version(0x03000000).build()),
              HasSubstr("big-endian"));
}

// Every strict prefix of a valid file with metadata and tensors is rejected.
TEST_F(GgufHostileTest, TruncatedAnywhere) {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama").kv_string_array("list", {"a", "bc"});
  b.kv_u32("n", 5).f32_tensor("w", {2, 2}, {1, 2, 3, 4});
  b.tensor("q", kQ4_0, {32}, std::string(18, '\0'));
  const std::string full = b.build();
  ASSERT_TRUE(GgufFile::open(dir_.write("full.gguf", full)).ok());
  for (size_t len = 0; len < full.size(); ++len) {
    SCOPED_TRACE(len);
    open_error("prefix.gguf", full.substr(0, len));
  }
  // Cut inside the key's string, the tensor infos, and the data: messages say where.
  EXPECT_THAT(open_error("cut_data.gguf", full.substr(0, full.size() - 1)),
              HasSubstr("tensor 'q'"));
}

TEST_F(GgufHostileTest, StringLengthBeyondFile) {
  std::string payload;
  testing::put_u64(payload, 1000000);
  payload += "abc";
  EXPECT_THAT(open_error("strlen.gguf",
                         GgufBuilder().kv_raw("bad.key", GgufType::kString, payload).build()),
              HasSubstr("metadata key 'bad.key': string length 1000000"));
  // A key whose own length lies.
  std::string raw;
  testing::put_u32(raw, 0x46554747);
  testing::put_u32(raw, 3);
  testing::put_u64(raw, 0);
  testing::put_u64(raw, 1);
  testing::put_u64(raw, ~0ull);
  raw += "key";
  EXPECT_THAT(open_error("keylen.gguf", raw), HasSubstr("metadata entry #0: key length"));
}

TEST_F(GgufHostileTest, ArrayCountsBeyondFile) {
  EXPECT_THAT(open_error("arr_u32.gguf",
                         GgufBuilder()
                             .kv_raw("tokens", GgufType::kArray,
                                     GgufBuilder::array_payload(GgufType::kU32, 1ull << 61, "1234"))
                             .build()),
              HasSubstr("metadata key 'tokens': array of 2305843009213693952 u32"));
  EXPECT_THAT(open_error("arr_str.gguf",
                         GgufBuilder()
                             .kv_raw("tokenizer.ggml.tokens", GgufType::kArray,
                                     GgufBuilder::array_payload(GgufType::kString, ~0ull, ""))
                             .build()),
              HasSubstr("'tokenizer.ggml.tokens': array of 18446744073709551615 strings"));
  EXPECT_THAT(open_error("arr_arr.gguf",
                         GgufBuilder()
                             .kv_raw("nest", GgufType::kArray,
                                     GgufBuilder::array_payload(GgufType::kArray, 1ull << 40, ""))
                             .build()),
              HasSubstr("'nest': array of 1099511627776 arrays"));
}

TEST_F(GgufHostileTest, ArraysNestedTooDeep) {
  std::string payload = GgufBuilder::array_payload(GgufType::kU8, 0, "");
  for (int depth = 0; depth < 20; ++depth) {
    payload = GgufBuilder::array_payload(GgufType::kArray, 1, payload);
  }
  EXPECT_THAT(
      open_error("deep.gguf", GgufBuilder().kv_raw("deep", GgufType::kArray, payload).build()),
      HasSubstr("'deep': arrays nested deeper than"));
}

// Many tiny nested arrays would cost ~150 bytes of memory per 12 file bytes: capped.
TEST_F(GgufHostileTest, TooManyNestedArrays) {
  const uint64_t n = 70000;
  std::string elems;
  for (uint64_t i = 0; i < n; ++i) elems += GgufBuilder::array_payload(GgufType::kU8, 0, "");
  EXPECT_THAT(
      open_error("many.gguf", GgufBuilder()
                                  .kv_raw("lists", GgufType::kArray,
                                          GgufBuilder::array_payload(GgufType::kArray, n, elems))
                                  .build()),
      HasSubstr("'lists': more than 65536 nested arrays"));
}

TEST_F(GgufHostileTest, FifoIsRejectedWithoutBlocking) {
  const std::string fifo = dir_.path("fifo.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(fifo);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr(fifo + ": not a regular file"));
}

TEST_F(GgufHostileTest, UnknownValueTypes) {
  EXPECT_THAT(
      open_error("type13.gguf", GgufBuilder().kv_raw("k", static_cast<GgufType>(13), "").build()),
      HasSubstr("'k': unknown value type 13"));
  EXPECT_THAT(open_error("elem99.gguf",
                         GgufBuilder()
                             .kv_raw("k", GgufType::kArray,
                                     GgufBuilder::array_payload(static_cast<GgufType>(99), 1, "x"))
                             .build()),
              HasSubstr("'k': unknown array element type 99"));
  EXPECT_THAT(
      open_error("bool2.gguf", GgufBuilder().kv_raw("flag", GgufType::kBool, "\x02").build()),
      HasSubstr("'flag': bool value 2"));
}

TEST_F(GgufHostileTest, DuplicateKeysAndTensors) {
  EXPECT_THAT(open_error("dupkey.gguf", GgufBuilder().kv_u32("a.b", 1).kv_u32("a.b", 2).build()),
              HasSubstr("metadata key 'a.b': appears twice"));
  GgufBuilder b;
  b.f32_tensor("w", {1}, {1}).f32_tensor("w", {1}, {2});
  EXPECT_THAT(open_error("duptensor.gguf", b.build()), HasSubstr("tensor 'w': appears twice"));
}

TEST_F(GgufHostileTest, EmptyNames) {
  EXPECT_THAT(open_error("emptykey.gguf", GgufBuilder().kv_u32("", 1).build()),
              HasSubstr("key length 0"));
  GgufBuilder b;
  b.f32_tensor("", {1}, {1});
  EXPECT_THAT(open_error("emptytensor.gguf", b.build()), HasSubstr("empty tensor name"));
}

TEST_F(GgufHostileTest, BadDims) {
  auto one = [](std::string_view name, std::vector<uint64_t> ne, uint32_t type = kF32) {
    GgufBuilder b;
    b.raw_tensor_info(name, type, ne, 0).trailing(std::string(64, '\0'));
    return b.build();
  };
  EXPECT_THAT(open_error("ndims5.gguf", one("t5", {1, 1, 1, 1, 1})),
              HasSubstr("tensor 't5': n_dims 5 is not in [1, 4]"));
  EXPECT_THAT(open_error("ndims0.gguf", one("t0", {})), HasSubstr("tensor 't0': n_dims 0"));
  EXPECT_THAT(open_error("zerodim.gguf", one("z", {4, 0})),
              HasSubstr("tensor 'z': dimension 1 has invalid size 0"));
  EXPECT_THAT(open_error("negdim.gguf", one("neg", {~0ull})),
              HasSubstr("tensor 'neg': dimension 0 has invalid size"));
  EXPECT_THAT(open_error("overflow.gguf", one("big", {1ull << 32, 1ull << 32, 1ull << 32})),
              HasSubstr("tensor 'big': element count overflows"));
  // 2^62 F64 elements fit in int64 but their byte size (2^65) does not fit in 64 bits.
  EXPECT_THAT(open_error("bytes.gguf", one("wide", {1ull << 31, 1ull << 31}, kF64)),
              HasSubstr("tensor 'wide': byte size overflows"));
  // Absurd but representable: caught by the bounds check.
  EXPECT_THAT(open_error("absurd.gguf", one("huge", {1ull << 40, 1ull << 20})),
              HasSubstr("tensor 'huge': data"));
  EXPECT_THAT(open_error("row.gguf", one("rows", {48, 2}, kQ4_0)),
              HasSubstr("tensor 'rows': row size 48 is not a multiple of the Q4_0 block size 32"));
}

TEST_F(GgufHostileTest, UnknownTensorTypes) {
  GgufBuilder b;
  b.raw_tensor_info("odd", 99, {32}, 0).trailing(std::string(256, '\0'));
  EXPECT_THAT(open_error("type99.gguf", b.build()),
              HasSubstr("tensor 'odd': unknown ggml type id 99"));
  GgufBuilder iq;
  iq.raw_tensor_info("iq", 16, {256}, 0).trailing(std::string(256, '\0'));
  EXPECT_THAT(open_error("iq.gguf", iq.build()),
              HasSubstr("tensor 'iq': ggml type IQ2_XXS (id 16) is not supported"));
  // tessera's own dtype ids (FP8, from 1000 up) are not ggml types.
  GgufBuilder f8;
  f8.raw_tensor_info("f8", static_cast<uint32_t>(DType::kF8_E4M3), {32}, 0)
      .trailing(std::string(256, '\0'));
  EXPECT_THAT(open_error("f8.gguf", f8.build()), HasSubstr("tensor 'f8': unknown ggml type id 1000"));
}

TEST_F(GgufHostileTest, OffsetsMisalignedOrPastTheEnd) {
  GgufBuilder mis;
  mis.f32_tensor("a", {8}, std::vector<float>(8));
  mis.raw_tensor_info("b", kF32, {1}, 4);
  EXPECT_THAT(open_error("misaligned.gguf", mis.build()),
              HasSubstr("tensor 'b': data offset 4 is not a multiple of the alignment 32"));

  GgufBuilder past;
  past.f32_tensor("a", {8}, std::vector<float>(8));
  past.raw_tensor_info("far", kF32, {1}, 1ull << 40);
  EXPECT_THAT(open_error("past.gguf", past.build()),
              HasSubstr("tensor 'far': data [1099511627776, +4)"));

  GgufBuilder wrap;  // offset + size would wrap around 2^64
  wrap.f32_tensor("a", {8}, std::vector<float>(8));
  wrap.raw_tensor_info("wrap", kF32, {8}, ~0ull - 31);
  EXPECT_THAT(open_error("wrap.gguf", wrap.build()), HasSubstr("tensor 'wrap': data"));

  GgufBuilder tail;  // starts inside, ends outside
  tail.f32_tensor("a", {8}, std::vector<float>(8));
  tail.raw_tensor_info("tail", kF32, {16}, 0);
  EXPECT_THAT(open_error("tail.gguf", tail.build()),
              HasSubstr("tensor 'tail': data [0, +64) at data section offset"));
}

TEST_F(GgufHostileTest, Alignment) {
  EXPECT_THAT(open_error("align48.gguf", GgufBuilder().kv_u32("general.alignment", 48).build()),
              HasSubstr("'general.alignment': value 48 is not a power of two"));
  EXPECT_THAT(open_error("align0.gguf", GgufBuilder().kv_u32("general.alignment", 0).build()),
              HasSubstr("'general.alignment': value 0"));
  EXPECT_THAT(open_error("alignneg.gguf", GgufBuilder().kv_i32("general.alignment", -32).build()),
              HasSubstr("'general.alignment': value -32"));
  EXPECT_THAT(
      open_error("alignstr.gguf", GgufBuilder().kv_string("general.alignment", "32").build()),
      HasSubstr("'general.alignment': has type string"));
}

// Counts that claim far more entries than the file holds fail on the first missing byte,
// without reserving memory for the claimed count.
TEST_F(GgufHostileTest, LyingCounts) {
  EXPECT_THAT(open_error("kvcount.gguf",
                         GgufBuilder().kv_u32("a", 1).kv_count_override(1ull << 60).build()),
              HasSubstr("metadata entry #1: truncated"));
  GgufBuilder b;
  b.f32_tensor("w", {1}, {1}).tensor_count_override(~0ull);
  EXPECT_THAT(open_error("tcount.gguf", b.build()), HasSubstr("tensor info #1"));
}

TEST_F(GgufHostileTest, NotARegularFile) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(dir_.path());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr(dir_.path()));
  EXPECT_THAT(f.status().message(), HasSubstr("not a regular file"));

  const std::string missing = dir_.path("missing.gguf");
  f = GgufFile::open(missing);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(f.status().message(), HasSubstr(missing));
  EXPECT_THAT(f.status().message(), HasSubstr("No such file"));
}

}  // namespace
}  // namespace tessera
