#include "tools/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

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

TEST(LengthDistribution, LogNormalHasItsMeanAndMedianAndALongTail) {
  auto d = LengthDistribution::parse("lognormal:161:1");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->to_string(), "lognormal:161:1");
  // mu = ln(161) - 1/2; the cap is exp(mu + 4): 161 x e^3.5.
  EXPECT_EQ(d->max(), static_cast<int32_t>(std::round(161 * std::exp(3.5))));
  std::mt19937_64 rng(5);
  std::vector<int32_t> v;
  const int n = 40000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    v.push_back(d->sample(rng));
    ASSERT_GE(v.back(), 1);
    ASSERT_LE(v.back(), d->max());
    sum += v.back();
  }
  std::sort(v.begin(), v.end());
  EXPECT_NEAR(sum / n, 161.0, 161.0 * 0.03);
  EXPECT_NEAR(v[n / 2], 161.0 * std::exp(-0.5), 161.0 * 0.03);  // the median, below the mean
  EXPECT_GT(v[n * 99 / 100], 4 * 161);                         // the tail: p99 = median x e^2.33
  // SIGMA 0 is the mean every time.
  auto flat = LengthDistribution::parse("lognormal:50:0");
  ASSERT_TRUE(flat.ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(flat->sample(rng), 50);
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
        "normal:128:-1", "normal:x:1", "poisson:3", "fixed:", "128:256", "lognormal:100",
        "lognormal:0:1", "lognormal:100:-1", "lognormal:100:4", "lognormal:100:x"}) {
    EXPECT_FALSE(LengthDistribution::parse(spec).ok()) << spec;
  }
}

}  // namespace
}  // namespace tessera::cli
