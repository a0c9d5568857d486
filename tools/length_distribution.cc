#include "tools/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera::cli {

namespace {

constexpr int64_t kMaxLength = 1 << 24;

absl::StatusOr<int64_t> parse_length(const std::string& spec, const std::string& text) {
  int64_t v;
  if (!absl::SimpleAtoi(text, &v) || v < 1 || v > kMaxLength) {
    return absl::InvalidArgumentError(absl::StrCat("length distribution '", spec, "': '", text,
                                                   "' is not a length in [1, ", kMaxLength, "]"));
  }
  return v;
}

}  // namespace

LengthDistribution LengthDistribution::fixed(int32_t length) {
  return LengthDistribution(Kind::kFixed, std::max(length, 1), 0);
}

LengthDistribution LengthDistribution::lognormal(double mean, double sigma) {
  return LengthDistribution(Kind::kLogNormal, std::max(mean, 1.0), std::clamp(sigma, 0.0, 3.0));
}

absl::StatusOr<LengthDistribution> LengthDistribution::parse(const std::string& spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ':');
  const std::string usage = absl::StrCat(
      "length distribution '", spec,
      "': expected N, fixed:N, uniform:LO:HI, normal:MEAN:STDDEV or lognormal:MEAN:SIGMA");
  if (parts.size() == 1 || (parts.size() == 2 && parts[0] == "fixed")) {
    auto n = parse_length(spec, parts.back());
    if (!n.ok()) return n.status();
    return LengthDistribution(Kind::kFixed, static_cast<double>(*n), 0);
  }
  if (parts.size() == 3 && parts[0] == "uniform") {
    auto lo = parse_length(spec, parts[1]);
    if (!lo.ok()) return lo.status();
    auto hi = parse_length(spec, parts[2]);
    if (!hi.ok()) return hi.status();
    if (*lo > *hi) return absl::InvalidArgumentError(absl::StrCat(usage, " (LO > HI)"));
    return LengthDistribution(Kind::kUniform, static_cast<double>(*lo), static_cast<double>(*hi));
  }
  if (parts.size() == 3 && parts[0] == "normal") {
    auto mean = parse_length(spec, parts[1]);
    if (!mean.ok()) return mean.status();
    double stddev;
    if (!absl::SimpleAtod(parts[2], &stddev) || !(stddev >= 0) || stddev > kMaxLength) {
      return absl::InvalidArgumentError(absl::StrCat(usage, " (STDDEV must be >= 0)"));
    }
    return LengthDistribution(Kind::kNormal, static_cast<double>(*mean), stddev);
  }
  if (parts.size() == 3 && parts[0] == "lognormal") {
    auto mean = parse_length(spec, parts[1]);
    if (!mean.ok()) return mean.status();
    double sigma;
    // exp(mu + 4 sigma) must stay a length: sigma beyond 3 is no length distribution anyway.
    if (!absl::SimpleAtod(parts[2], &sigma) || !(sigma >= 0) || sigma > 3) {
      return absl::InvalidArgumentError(absl::StrCat(usage, " (SIGMA must be in [0, 3])"));
    }
    return LengthDistribution(Kind::kLogNormal, static_cast<double>(*mean), sigma);
  }
  return absl::InvalidArgumentError(usage);
}

int32_t LengthDistribution::sample(std::mt19937_64& rng) const {
  switch (kind_) {
    case Kind::kFixed:
      return static_cast<int32_t>(a_);
    case Kind::kUniform:
      return static_cast<int32_t>(std::uniform_int_distribution<int64_t>(
          static_cast<int64_t>(a_), static_cast<int64_t>(b_))(rng));
    case Kind::kNormal: {
      const double v = std::round(std::normal_distribution<double>(a_, b_)(rng));
      return static_cast<int32_t>(std::clamp(v, 1.0, static_cast<double>(max())));
    }
    case Kind::kLogNormal: {
      const double v = std::round(std::lognormal_distribution<double>(mu(), b_)(rng));
      return static_cast<int32_t>(std::clamp(v, 1.0, static_cast<double>(max())));
    }
  }
  return 1;
}

int32_t LengthDistribution::max() const {
  switch (kind_) {
    case Kind::kFixed:
      return static_cast<int32_t>(a_);
    case Kind::kUniform:
      return static_cast<int32_t>(b_);
    case Kind::kNormal:
      return static_cast<int32_t>(std::max(1.0, std::round(a_ + 4 * b_)));
    case Kind::kLogNormal:
      return static_cast<int32_t>(std::clamp(std::round(std::exp(mu() + 4 * b_)), 1.0,
                                             static_cast<double>(kMaxLength)));
  }
  return 1;
}

std::string LengthDistribution::to_string() const {
  switch (kind_) {
    case Kind::kFixed:
      return absl::StrCat(static_cast<int64_t>(a_));
    case Kind::kUniform:
      return absl::StrCat("uniform:", static_cast<int64_t>(a_), ":", static_cast<int64_t>(b_));
    case Kind::kNormal:
      return absl::StrCat("normal:", static_cast<int64_t>(a_), ":", b_);
    case Kind::kLogNormal:
      return absl::StrCat("lognormal:", static_cast<int64_t>(a_), ":", b_);
  }
  return "";
}

}  // namespace tessera::cli
