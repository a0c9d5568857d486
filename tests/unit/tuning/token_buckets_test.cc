// Token padding: decode buckets, prefill padding, bucket lists.
#include "runtime/tuning/token_buckets.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(TokenBuckets, DecodeBucketIsTheSmallestBucketAtLeastN) {
  const TokenBuckets b;  // 1,2,4,...,256; pad 64
  EXPECT_EQ(decode_bucket(b, 0), 0);
  EXPECT_EQ(decode_bucket(b, 1), 1);
  EXPECT_EQ(decode_bucket(b, 3), 4);
  EXPECT_EQ(decode_bucket(b, 17), 32);
  EXPECT_EQ(decode_bucket(b, 256), 256);
  // Past the largest bucket: a multiple of the prefill pad.
  EXPECT_EQ(decode_bucket(b, 257), 320);
  EXPECT_EQ(decode_bucket(b, 320), 320);
  EXPECT_EQ(decode_bucket(b, 321), 384);
}

TEST(TokenBuckets, PrefillRoundsUpToThePad) {
  const TokenBuckets b;
  EXPECT_EQ(prefill_padded(b, 0), 0);
  EXPECT_EQ(prefill_padded(b, 1), 64);
  EXPECT_EQ(prefill_padded(b, 64), 64);
  EXPECT_EQ(prefill_padded(b, 65), 128);
  EXPECT_EQ(prefill_padded(b, 2000), 2048);
}

TEST(TokenBuckets, StepPaddingDependsOnPrefill) {
  const TokenBuckets b;
  EXPECT_EQ(padded_step_tokens(b, 5, /*has_prefill=*/false), 8);
  EXPECT_EQ(padded_step_tokens(b, 5, /*has_prefill=*/true), 64);
}

TEST(TokenBuckets, CustomBuckets) {
  TokenBuckets b;
  b.decode = {3, 10};
  b.prefill_pad = 16;
  ASSERT_TRUE(b.validate().ok());
  EXPECT_EQ(decode_bucket(b, 1), 3);
  EXPECT_EQ(decode_bucket(b, 4), 10);
  EXPECT_EQ(decode_bucket(b, 11), 16);
  EXPECT_EQ(prefill_padded(b, 17), 32);
}

TEST(TokenBuckets, ValidateNamesTheBadValue) {
  TokenBuckets b;
  b.decode = {};
  EXPECT_THAT(std::string(b.validate().message()), HasSubstr("empty"));
  b.decode = {0, 1};
  EXPECT_THAT(std::string(b.validate().message()), HasSubstr("bucket 0 is 0"));
  b.decode = {1, 2, 2};
  EXPECT_THAT(std::string(b.validate().message()), HasSubstr("bucket 2 (2) is not greater"));
  b.decode = {1};
  b.prefill_pad = 0;
  EXPECT_THAT(std::string(b.validate().message()), HasSubstr("prefill pad is 0"));
}

TEST(BucketList, ParsesAndFormats) {
  absl::StatusOr<std::vector<int64_t>> v = parse_bucket_list("1, 2,4 ,8");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(format_bucket_list(*v), "1,2,4,8");
}

TEST(BucketList, ErrorsNameTheTextAndElement) {
  absl::StatusOr<std::vector<int64_t>> v = parse_bucket_list("1,two,4");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("'1,two,4'"));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("element 1 ('two')"));
  v = parse_bucket_list("8,4");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("ascend"));
  EXPECT_FALSE(parse_bucket_list("").ok());
  EXPECT_FALSE(parse_bucket_list("1,,2").ok());
}

}  // namespace
}  // namespace tessera
