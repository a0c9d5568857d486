// parse_memory_size / format_memory_size: every unit, decimals, spacing, and every error.
#include "runtime/placement/memory_size.h"

#include <cstdint>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * 1024;
constexpr uint64_t kGiB = kMiB * 1024;
constexpr uint64_t kTiB = kGiB * 1024;

uint64_t parse_ok(const std::string& text) {
  absl::StatusOr<uint64_t> v = parse_memory_size(text, "max_memory");
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : 0;
}

std::string parse_error(const std::string& text) {
  absl::StatusOr<uint64_t> v = parse_memory_size(text, "max_memory");
  EXPECT_FALSE(v.ok()) << text << " parsed as " << (v.ok() ? *v : 0);
  if (v.ok()) return "";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(v.status().message());
}

TEST(ParseMemorySize, PlainBytes) {
  EXPECT_EQ(parse_ok("0"), 0u);
  EXPECT_EQ(parse_ok("123456789"), 123456789u);
  EXPECT_EQ(parse_ok("18446744073709551615"), std::numeric_limits<uint64_t>::max());
}

TEST(ParseMemorySize, DecimalUnitsArePowersOf1000) {
  EXPECT_EQ(parse_ok("7B"), 7u);
  EXPECT_EQ(parse_ok("3KB"), 3000u);
  EXPECT_EQ(parse_ok("3MB"), 3000000u);
  EXPECT_EQ(parse_ok("3GB"), 3000000000u);
  EXPECT_EQ(parse_ok("3TB"), 3000000000000u);
}

TEST(ParseMemorySize, BinaryUnitsArePowersOf1024) {
  EXPECT_EQ(parse_ok("3KiB"), 3 * kKiB);
  EXPECT_EQ(parse_ok("3MiB"), 3 * kMiB);
  EXPECT_EQ(parse_ok("40GiB"), 40 * kGiB);
  EXPECT_EQ(parse_ok("2TiB"), 2 * kTiB);
}

TEST(ParseMemorySize, UnitsAreCaseInsensitive) {
  EXPECT_EQ(parse_ok("40gib"), 40 * kGiB);
  EXPECT_EQ(parse_ok("40GIB"), 40 * kGiB);
  EXPECT_EQ(parse_ok("5mb"), 5000000u);
  EXPECT_EQ(parse_ok("5Mb"), 5000000u);  // bytes, not bits (accelerate would divide by 8)
  EXPECT_EQ(parse_ok("9b"), 9u);
}

TEST(ParseMemorySize, DecimalsAndSpaces) {
  EXPECT_EQ(parse_ok("1.5GiB"), 3 * kGiB / 2);
  EXPECT_EQ(parse_ok("1.5 GiB"), 3 * kGiB / 2);
  EXPECT_EQ(parse_ok("  40GiB  "), 40 * kGiB);
  EXPECT_EQ(parse_ok("0.5KB"), 500u);
  EXPECT_EQ(parse_ok(".5KiB"), 512u);
  EXPECT_EQ(parse_ok("1.0001KB"), 1000u);    // fractions of a byte are truncated
  EXPECT_EQ(parse_ok("0.1GB"), 100000000u);  // exact: no binary floating point
  EXPECT_EQ(parse_ok("2.000B"), 2u);
  EXPECT_EQ(parse_ok("15.3GiB"), 16428249907u);  // floor(15.3 * 2^30)
}

TEST(ParseMemorySize, Errors) {
  EXPECT_THAT(parse_error(""), HasSubstr("max_memory: \"\" is empty"));
  EXPECT_THAT(parse_error("   "), HasSubstr("is empty"));
  EXPECT_THAT(parse_error("-1"), HasSubstr("\"-1\" is negative"));
  EXPECT_THAT(parse_error("-5GiB"), HasSubstr("is negative"));
  EXPECT_THAT(parse_error("5XB"), HasSubstr("\"5XB\" has unknown unit \"XB\""));
  EXPECT_THAT(parse_error("5 G"), HasSubstr("unknown unit \"G\""));
  EXPECT_THAT(parse_error("GiB"), HasSubstr("\"GiB\" is not a number"));
  EXPECT_THAT(parse_error("abc"), HasSubstr("is not a number"));
  EXPECT_THAT(parse_error("1.5"), HasSubstr("fractional number of bytes"));
  EXPECT_THAT(parse_error("1.5B"), HasSubstr("fractional number of bytes"));
  EXPECT_THAT(parse_error("1e9"), HasSubstr("unknown unit \"e9\""));
  EXPECT_THAT(parse_error("18446744073709551616"), HasSubstr("too large"));
  EXPECT_THAT(parse_error("17179869184GiB"), HasSubstr("too large"));  // 2^64 bytes
  EXPECT_THAT(parse_error("16777216TiB"), HasSubstr("too large"));
  EXPECT_EQ(parse_ok("18446744073709551.615KB"), std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(parse_error("18446744073709551.616KB"), HasSubstr("too large"));  // the fraction
  // Every message says what is allowed.
  EXPECT_THAT(parse_error("5XB"), HasSubstr("KB, MB, GB, TB, KiB, MiB, GiB, TiB"));
}

TEST(ParseMemorySize, ErrorNamesTheKey) {
  absl::StatusOr<uint64_t> v = parse_memory_size("lots", "max_memory for device 3");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("max_memory for device 3: \"lots\""));
}

TEST(FormatMemorySize, Units) {
  EXPECT_EQ(format_memory_size(0), "0 B");
  EXPECT_EQ(format_memory_size(1023), "1023 B");
  EXPECT_EQ(format_memory_size(1024), "1.0 KiB");
  EXPECT_EQ(format_memory_size(1536), "1.5 KiB");
  EXPECT_EQ(format_memory_size(kMiB - 1), "1.0 MiB");  // not "1024.0 KiB"
  EXPECT_EQ(format_memory_size(16428249907u), "15.3 GiB");
  EXPECT_EQ(format_memory_size(80 * kGiB), "80.0 GiB");
  EXPECT_EQ(format_memory_size(3 * kTiB), "3.0 TiB");
}

TEST(FormatMemorySize, RoundTrips) {
  EXPECT_EQ(parse_ok(format_memory_size(40 * kGiB)), 40 * kGiB);
}

}  // namespace
}  // namespace tessera
