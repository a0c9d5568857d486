#include "tools/length_distribution.h"

#include <random>

#include "gtest/gtest.h"

namespace tessera::cli {
namespace {

TEST(LengthDistribution, Fixed) {
  for (const char* spec : {"128", "fixed:128"}) {
    auto d = LengthDistribution::parse(spec);
    ASSERT_TRUE(d.ok()) << d.status();
    std::mt19937_64 rng(1);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(d->sample(rng), 128);
    EXPECT_EQ(d->max(), 128);
    EXPECT_EQ(d->to_string(), "128");
  }
}

TEST(LengthDistribution, UniformStaysInRangeAndCoversIt) {
  auto d = LengthDistribution::parse("uniform:32:40");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(7);
  std::vector<int> seen(41, 0);
  for (int i = 0; i < 2000; ++i) {
    const int32_t n = d->sample(rng);
    ASSERT_GE(n, 32);
    ASSERT_LE(n, 40);
    ++seen[n];
  }
  for (int n = 32; n <= 40; ++n) EXPECT_GT(seen[n], 0) << n;
  EXPECT_EQ(d->max(), 40);
  EXPECT_EQ(d->to_string(), "uniform:32:40");
}

TEST(LengthDistribution, NormalHasItsMeanAndIsClamped) {
  auto d = LengthDistribution::parse("normal:128:32");
  ASSERT_TRUE(d.ok()) << d.status();
  std::mt19937_64 rng(3);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t v = d->sample(rng);
    ASSERT_GE(v, 1);
    ASSERT_LE(v, d->max());
    sum += v;
  }
  EXPECT_NEAR(sum / n, 128.0, 2.0);
  EXPECT_EQ(d->max(), 256);

  // A wide normal would go below 1 often: it is clamped to 1.
  auto wide = LengthDistribution::parse("normal:2:50");
  ASSERT_TRUE(wide.ok());
  for (int i = 0; i < 1000; ++i) ASSERT_GE(wide->sample(rng), 1);
}

TEST(LengthDistribution, SameSeedSameLengths) {
  auto d = LengthDistribution::parse("uniform:1:1000");
  ASSERT_TRUE(d.ok());
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(d->sample(a), d->sample(b));
}

TEST(LengthDistribution, RejectsMalformedSpecs) {
  for (const char* spec :
       {"", "0", "-5", "abc", "uniform:10", "uniform:20:10", "uniform:0:10", "normal:128",
        "normal:128:-1", "normal:x:1", "poisson:3", "fixed:", "128:256"}) {
    EXPECT_FALSE(LengthDistribution::parse(spec).ok()) << spec;
  }
}

}  // namespace
}  // namespace tessera::cli
