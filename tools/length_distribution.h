// Token-length distributions for synthetic benchmark requests, written as the --prompt-len and
// --output-len flags take them:
//   N                   always N                      (also fixed:N)
//   uniform:LO:HI       uniformly random in [LO, HI]
//   normal:MEAN:STDDEV  normal, rounded, kept in [1, MEAN + 4 x STDDEV]
//   lognormal:MEAN:SIGMA  log-normal with that mean and the underlying normal's SIGMA (median
//                       MEAN x exp(-SIGMA^2 / 2)), rounded, kept in [1, exp(mu + 4 x SIGMA)]:
//                       the long right tail of real prompt and answer lengths
// Every length is at least 1.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::cli {

class LengthDistribution {
 public:
  static absl::StatusOr<LengthDistribution> parse(const std::string& spec);
  static LengthDistribution fixed(int32_t length);
  // `mean` >= 1, `sigma` in [0, 3] (as parse checks them).
  static LengthDistribution lognormal(double mean, double sigma);

  int32_t sample(std::mt19937_64& rng) const;
  // The largest length sample() can return.
  int32_t max() const;
  // The spec in canonical form ("128", "uniform:32:256", "normal:128:32", "lognormal:161:1").
  std::string to_string() const;

 private:
  enum class Kind { kFixed, kUniform, kNormal, kLogNormal };
  LengthDistribution(Kind kind, double a, double b) : kind_(kind), a_(a), b_(b) {}

  Kind kind_;
  double a_;  // fixed: length; uniform: LO; normal, lognormal: MEAN
  double b_;  // uniform: HI; normal: STDDEV; lognormal: SIGMA
  // lognormal: the underlying normal's mean, ln(MEAN) - SIGMA^2 / 2.
  double mu() const { return std::log(a_) - b_ * b_ / 2; }
};

}  // namespace tessera::cli
