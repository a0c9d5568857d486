// Percentiles and summary statistics of a sample, for benchmark reports.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace tessera::cli {

// The p-th percentile (p in [0, 100]) of ascending `sorted` values, interpolating linearly
// between the two closest ranks (numpy.percentile's default, as vLLM's benchmarks report).
// Empty input gives 0.
double percentile(std::span<const double> sorted, double p);

struct Summary {
  size_t count = 0;
  double mean = 0;
  double stddev = 0;  // population
  double min = 0;
  double max = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
};

// Every field of Summary for `values` (any order); all zeros when empty.
Summary summarize(std::vector<double> values);

}  // namespace tessera::cli
